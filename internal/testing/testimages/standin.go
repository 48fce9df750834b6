package testimages

import (
	"cmp"
	"context"
	"fmt"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"

	"github.com/pcsync/pcsync/internal/testing/testcluster"
	"github.com/pcsync/pcsync/pkg/images"
)

// StandInOptions describe a stand-in image: pcsync's base image with a
// few files added (a stand-in CLI, a transcript, a substitute's script)
// and, when set, its own entrypoint and user. Start from
// DefaultStandInOptions.
type StandInOptions struct {
	// Base is the image the stand-in is built on; nil: pcsync's base image
	// (images.Base) as Build builds it, tagged Tag.
	Base v1.Image
	// Tag is the base image's tag when Base is nil. Default "dev".
	Tag string
	// Files are added by their path inside the image (no leading slash),
	// each mode 0755 and owned by root (WithFiles).
	Files map[string]string
	// Entrypoint, when set, is the image's entrypoint, and its Cmd is
	// cleared.
	Entrypoint []string
	// User, when set, is the image's user ("uid:gid").
	User string
}

// DefaultStandInOptions returns options for a stand-in on pcsync's base
// image tagged "dev", with no files.
func DefaultStandInOptions() StandInOptions {
	return StandInOptions{Tag: "dev"}
}

func (o *StandInOptions) complete() {
	o.Tag = cmp.Or(o.Tag, DefaultStandInOptions().Tag)
}

// StandIn builds the stand-in image o describes, pushes it to reg as ref
// (host:port/org/name:tag) and returns ref.
func StandIn(ctx context.Context, reg *testcluster.Registry, ref string, o StandInOptions) (string, error) {
	img, err := o.image(ctx)
	if err != nil {
		return "", fmt.Errorf("stand-in %s: %w", ref, err)
	}
	if err := reg.Push(ctx, ref, img); err != nil {
		return "", fmt.Errorf("stand-in %s: %w", ref, err)
	}
	return ref, nil
}

// image is the stand-in image of o.
func (o StandInOptions) image(ctx context.Context) (v1.Image, error) {
	o.complete()
	base := o.Base
	if base == nil {
		built, err := Build(ctx, []string{images.Base}, o.Tag)
		if err != nil {
			return nil, err
		}
		base = built[images.Base]
	}
	img, err := WithFiles(base, o.Files)
	if err != nil {
		return nil, err
	}
	if o.Entrypoint == nil && o.User == "" {
		return img, nil
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("image config: %w", err)
	}
	cfg := cf.Config.DeepCopy()
	if o.Entrypoint != nil {
		cfg.Entrypoint, cfg.Cmd = o.Entrypoint, nil
	}
	if o.User != "" {
		cfg.User = o.User
	}
	return mutate.Config(img, *cfg)
}
