package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pcsync/pcsync/pkg/images"
)

// TestDefaultImageIsTheRelease: with no Settings spec.images.registry,
// render names pcsync's images with the release version of package
// images, which a binary built without a stamp (go build, go test) has,
// so that render's output is the same from any build of the same source;
// version prints it.
func TestDefaultImageIsTheRelease(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "acme.yaml"), []byte("apiVersion: pcsync.io/v1alpha1\nkind: Company\nmetadata: {name: acme}\n"+
		"spec:\n  id: acme-1\n  agents: [{name: coder, adapter: claude_local}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"render", dir}, &stdout, &stderr); code != 0 {
		t.Fatalf("render: exit code %d\n%s", code, stderr.String())
	}
	if want := "image: " + images.Pcsync + ":" + images.Version + "\n"; !strings.Contains(stdout.String(), want) {
		t.Errorf("render's egress proxy does not run %q:\n%s", want, stdout.String())
	}
	stdout.Reset()
	if code := run(context.Background(), []string{"version"}, &stdout, &stderr); code != 0 {
		t.Fatalf("version: exit code %d\n%s", code, stderr.String())
	}
	if want := "pcsync " + images.Version + " ("; !strings.HasPrefix(stdout.String(), want) {
		t.Errorf("version = %q, want it to start with %q", stdout.String(), want)
	}
}
