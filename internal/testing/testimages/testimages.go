package testimages

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/pcsync/pcsync/internal/imagebuild"
	"github.com/pcsync/pcsync/internal/testing/testcluster"
	"github.com/pcsync/pcsync/pkg/images"
)

// Build builds the named images of pcsync's catalog (package images) from
// this tree, as make images does, tagged tag, and returns them by name.
// Layers come from internal/imagebuild's cache when their spec is unchanged.
func Build(ctx context.Context, names []string, tag string) (map[string]v1.Image, error) {
	o := imagebuild.DefaultOptions()
	o.Images = names
	o.Version = tag
	built, err := imagebuild.Build(ctx, o)
	if err != nil {
		return nil, fmt.Errorf("images %v: %w", names, err)
	}
	out := make(map[string]v1.Image, len(built))
	for _, b := range built {
		out[b.Name] = b.Image
	}
	return out, nil
}

// WithFiles returns img with one more layer holding files, each mode 0755
// and owned by root, by their path inside the image (no leading slash).
func WithFiles(img v1.Image, files map[string]string) (v1.Image, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, name := range slices.Sorted(maps.Keys(files)) {
		content := files[name]
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o755, Size: int64(len(content)), Typeflag: tar.TypeReg,
			ModTime: time.Unix(0, 0)}); err != nil {
			return nil, fmt.Errorf("image layer: %s: %w", name, err)
		}
		if _, err := io.WriteString(tw, content); err != nil {
			return nil, fmt.Errorf("image layer: %s: %w", name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("image layer: %w", err)
	}
	data := buf.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil })
	if err != nil {
		return nil, fmt.Errorf("image layer: %w", err)
	}
	return mutate.AppendLayers(img, layer)
}

// Push pushes each image of byName to reg under registry/<name>:tag, where
// registry is reg's host with an organisation (images.Ref).
func Push(ctx context.Context, reg *testcluster.Registry, registry, tag string, byName map[string]v1.Image) error {
	for _, name := range slices.Sorted(maps.Keys(byName)) {
		if err := reg.Push(ctx, images.Ref(registry, name, tag), byName[name]); err != nil {
			return err
		}
	}
	return nil
}
