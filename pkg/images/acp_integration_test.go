//go:build integration

package images

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pcsync/pcsync/internal/testing/paperclipserver"
)

// TestACPServersAreWhatPaperclipRuns fails when an image's ACP server is
// not the release the real Paperclip (paperclipserver.Version, installed by
// hack/paperclip/install.sh) bundles, when its package has no bin of that
// name, or when the adapter's ACP engine does not run that bare command in
// a sandbox (its dist/server/acp.js).
func TestACPServersAreWhatPaperclipRuns(t *testing.T) {
	modules := filepath.Join(paperclipserver.DefaultInstall(), "node_modules")
	if _, err := os.Stat(filepath.Join(modules, "@paperclipai", "server")); err != nil {
		t.Fatalf("Paperclip %s is not installed (run hack/paperclip/install.sh, or set PCSYNC_PAPERCLIP_DIR): %v", paperclipserver.Version, err)
	}
	servers := acpServers()
	if len(servers) == 0 {
		t.Fatal("no ACP servers in the catalog")
	}
	for typ, acp := range servers {
		data, err := os.ReadFile(filepath.Join(modules, filepath.FromSlash(acp.Name), "package.json"))
		if err != nil {
			t.Errorf("%s: Paperclip %s bundles no %s: %v", typ, paperclipserver.Version, acp.Name, err)
			continue
		}
		var pkg struct {
			Version string
			Bin     map[string]string
		}
		if err := json.Unmarshal(data, &pkg); err != nil {
			t.Fatalf("%s: %s: %v", typ, acp.Name, err)
		}
		_, hasBin := pkg.Bin[acp.Binary]
		if diff := cmp.Diff(acp.Version+" bin "+acp.Binary, pkg.Version+" bin "+map[bool]string{true: acp.Binary}[hasBin]); diff != "" {
			t.Errorf("%s: the catalog's %s vs Paperclip's (-want +got):\n%s", typ, acp.Name, diff)
		}
		adapter := "adapter-" + strings.ReplaceAll(string(typ), "_", "-")
		js, err := os.ReadFile(filepath.Join(modules, "@paperclipai", adapter, "dist", "server", "acp.js"))
		if err != nil {
			t.Errorf("%s: %v", typ, err)
			continue
		}
		if want := "return \"" + acp.Binary + "\";"; !strings.Contains(string(js), want) {
			t.Errorf("%s: @paperclipai/%s/dist/server/acp.js has no %s: its sandbox command is not %s", typ, adapter, want, acp.Binary)
		}
	}
}
