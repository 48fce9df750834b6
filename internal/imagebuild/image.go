package imagebuild

import (
	"fmt"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/pcsync/pcsync/pkg/images"
)

// ConfigOf returns the container config of an image of the catalog, the
// one its Dockerfile gives too (images.Spec.Config): user, env, working
// directory, entrypoint and labels.
func ConfigOf(s images.Spec, base images.BaseSpec, version string) v1.Config {
	c := s.Config(base, version)
	return v1.Config{
		User:       c.User,
		Env:        c.Env,
		WorkingDir: c.WorkingDir,
		Entrypoint: c.Entrypoint,
		Labels:     c.Labels,
	}
}

// step is a layer and the history line that says how it was made.
type step struct {
	layer     v1.Layer
	createdBy string
}

// assemble returns from (an empty OCI image when nil) with steps appended
// and its config set to cfg, for linux/arch.
func assemble(from v1.Image, steps []step, cfg v1.Config, arch string) (v1.Image, error) {
	img := from
	if img == nil {
		img = mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	}
	for _, s := range steps {
		var err error
		img, err = mutate.Append(img, mutate.Addendum{
			Layer:     s.layer,
			MediaType: types.OCILayer,
			History:   v1.History{CreatedBy: s.createdBy, Created: v1.Time{Time: epoch}},
		})
		if err != nil {
			return nil, fmt.Errorf("image: %s: %w", s.createdBy, err)
		}
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("image: %w", err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", arch
	cf.Created = v1.Time{Time: epoch}
	cf.Config = cfg
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, fmt.Errorf("image: %w", err)
	}
	return img, nil
}
