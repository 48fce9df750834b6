package imagecheck

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pcsync/pcsync/pkg/config"
)

func loadConfig(t *testing.T, settings string, defaults config.ImageDefaults) *config.Model {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		"settings.yaml": "apiVersion: pcsync.io/v1alpha1\nkind: Settings\nmetadata: {name: s}\nspec:\n" + settings,
		"acme.yaml": `apiVersion: pcsync.io/v1alpha1
kind: Company
metadata: {name: acme}
spec:
  id: acme-id
  agents:
    - {name: coder, adapter: claude_local}
    - {name: reviewer, adapter: codex_local}
    - {name: custom, adapter: claude_local, image: ` + "127.0.0.1:1/acme/claude:1" + `}
`,
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	opts := config.DefaultLoadOptions()
	opts.Images = defaults
	m, err := config.Load(context.Background(), dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// The preflight names each missing image, who needs it and the command that
// fixes it, before any pod meets ErrImagePull.
func TestPreflight(t *testing.T) {
	host, _ := startRegistry(t, false, "pcsync/pcsync-agent-claude:v1.2.0")
	type row struct{ Image, Status, Users, Advice string }
	read := func(fs []Finding) []row {
		var out []row
		for _, f := range fs {
			out = append(out, row{f.Image, string(f.Result.Status), strings.Join(f.Users, ", "), f.Advice})
		}
		return out
	}
	m := loadConfig(t, "  images: {registry: "+host+"/pcsync, allowList: ['127.0.0.1:1/acme/*']}\n", config.ImageDefaults{Tag: "v1.2.0"})
	want := []row{
		{"127.0.0.1:1/acme/claude:1", "unreachable", "acme/custom", `check the registry's address "127.0.0.1:1/acme" and that this machine reaches it`},
		{host + "/pcsync/pcsync-agent-claude:v1.2.0", "found", "acme/coder", ""},
		{host + "/pcsync/pcsync-agent-codex:v1.2.0", "missing", "acme/reviewer",
			"build and push pcsync's images there: `make images REGISTRY=" + host + "/pcsync PUSH=1 TAG=v1.2.0` (docs/images.md)"},
	}
	if diff := cmp.Diff(want, read(Preflight(context.Background(), m, DefaultOptions()))); diff != "" {
		t.Errorf("Preflight (-want +got):\n%s", diff)
	}

	// No registry known: said without asking any registry.
	m = loadConfig(t, "  images: {allowList: ['127.0.0.1:1/acme/*']}\n", config.ImageDefaults{})
	noRegistry := "pcsync's images have no registry: push them with `make images REGISTRY=<registry> PUSH=1` and set Settings spec.images.registry to that registry (docs/images.md)"
	want = []row{
		{"127.0.0.1:1/acme/claude:1", "unreachable", "acme/custom", `check the registry's address "127.0.0.1:1/acme" and that this machine reaches it`},
		{"pcsync-agent-claude:dev", "invalid", "acme/coder", noRegistry},
		{"pcsync-agent-codex:dev", "invalid", "acme/reviewer", noRegistry},
	}
	if diff := cmp.Diff(want, read(Preflight(context.Background(), m, DefaultOptions()))); diff != "" {
		t.Errorf("Preflight without a registry (-want +got):\n%s", diff)
	}
}
