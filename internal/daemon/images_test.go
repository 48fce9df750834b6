package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pcsync/pcsync/pkg/config"
	"github.com/pcsync/pcsync/pkg/imagecheck"
)

// TestWarnMissingImages: each image the daemon cannot find is a WARN line
// naming the image, who needs it and the fix; a config that does not load
// logs nothing (the reconcile loop says why).
func TestWarnMissingImages(t *testing.T) {
	dir := t.TempDir()
	company := `apiVersion: pcsync.io/v1alpha1
kind: Company
metadata: {name: acme}
spec:
  id: acme-id
  agents:
    - {name: custom, adapter: claude_local, image: 127.0.0.1:1/acme/claude:1}
`
	settings := "apiVersion: pcsync.io/v1alpha1\nkind: Settings\nmetadata: {name: s}\nspec:\n  images: {registry: 127.0.0.1:1/pcsync, allowList: ['127.0.0.1:1/acme/*']}\n"
	for name, content := range map[string]string{"acme.yaml": company, "settings.yaml": settings} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	lo := config.DefaultLoadOptions()
	lo.Images = config.ImageDefaults{Tag: "v1.2.0"}
	type line struct{ Level, Msg, Image, For string }
	warn := func(dir string) []line {
		var buf bytes.Buffer
		WarnMissingImages(context.Background(), slog.New(slog.NewJSONHandler(&buf, nil)), dir, lo, imagecheck.DefaultOptions())
		var out []line
		for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
			if l == "" {
				continue
			}
			var r struct {
				Level, Msg, Image, For, Fix string
			}
			if err := json.Unmarshal([]byte(l), &r); err != nil {
				t.Fatal(err)
			}
			if r.Fix == "" {
				t.Errorf("%s: no fix", l)
			}
			out = append(out, line{r.Level, r.Msg, r.Image, r.For})
		}
		return out
	}
	want := []line{{"WARN", "image preflight: unreachable", "127.0.0.1:1/acme/claude:1", "acme/custom"}}
	if diff := cmp.Diff(want, warn(dir)); diff != "" {
		t.Errorf("WarnMissingImages (-want +got):\n%s", diff)
	}
	if err := os.WriteFile(filepath.Join(dir, "bad.yaml"), []byte("kind: Company\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := warn(dir); got != nil {
		t.Errorf("an invalid config: %v, want no line", got)
	}
}
