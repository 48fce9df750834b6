package testcluster

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/v1/random"
)

// TestRegistryPush pushes an image to a registry served in-process, reads it back
// and finds its layers in the blob directory; a second push and a reference to
// another registry behave.
func TestRegistryPush(t *testing.T) {
	dir := t.TempDir()
	reg, err := startRegistry(filepath.Join(dir, "blobs"), filepath.Join(dir, "registry.log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := reg.close(ctx); err != nil {
			t.Error(err)
		}
	})
	ctx := context.Background()
	img, err := random.Image(1<<20, 3)
	if err != nil {
		t.Fatal(err)
	}
	ref := reg.Ref("tests/random:1")
	for range 2 { // the second push finds every blob there
		if err := reg.Push(ctx, ref, img); err != nil {
			t.Fatal(err)
		}
	}
	got, err := reg.Image(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	wantDigest, _ := img.Digest()
	gotDigest, err := got.Digest()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(wantDigest.String(), gotDigest.String()); diff != "" {
		t.Errorf("digest read back (-pushed +got):\n%s", diff)
	}
	layers, _ := img.Layers()
	for _, l := range layers {
		h, _ := l.Digest()
		if _, err := os.Stat(filepath.Join(dir, "blobs", h.Algorithm, h.Hex)); err != nil {
			t.Errorf("layer %s not in the blob directory: %v", h, err)
		}
	}
	if err := reg.Push(ctx, "127.0.0.1:1/tests/random:1", img); err == nil {
		t.Error("push to another registry's reference: no error")
	}
}
