package imagebuild

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/pcsync/pcsync/pkg/images"
)

// Built is one image that Build made.
type Built struct {
	// Name is the image's name (images.Base, images.Agent(cli), ...).
	Name string
	// Image is the image.
	Image v1.Image
	// Elapsed is how long its own steps took (the base's include the
	// layers every image shares).
	Elapsed time.Duration
	// CLIVersion is the first line of an agent image's `<cli> --version`
	// when Options.Verify ran it.
	CLIVersion string
}

// builder holds a build's options.
type builder struct {
	o Options
}

// Build builds the images Options.Images names (all of images.All() by
// default), in catalog order, and returns them in that order. It fails
// naming what to install when root, debootstrap, npm or go is missing.
func Build(ctx context.Context, o Options) ([]Built, error) {
	o = o.complete()
	if o.Arch != runtime.GOARCH {
		return nil, fmt.Errorf("imagebuild: architecture %s: the build runs what it installs, so it must be the host's (%s)", o.Arch, runtime.GOARCH)
	}
	if err := checkTools(); err != nil {
		return nil, err
	}
	specs, err := selectImages(o.Images)
	if err != nil {
		return nil, err
	}
	b := &builder{o: o}

	start := time.Now()
	rootfs, baseLayer, err := b.baseRootfs(ctx)
	if err != nil {
		return nil, fmt.Errorf("image %s: %w", images.Base, err)
	}
	nodeTree, nodeLayer, err := b.node(ctx)
	if err != nil {
		return nil, fmt.Errorf("image %s: %w", images.Base, err)
	}
	pcsyncTree, pcsyncLayer, err := b.pcsync(ctx)
	if err != nil {
		return nil, fmt.Errorf("image %s: %w", images.Base, err)
	}
	base := o.Base
	baseSpec := images.Spec{Name: images.Base}
	baseImg, err := assemble(nil, []step{
		{baseLayer, fmt.Sprintf("debootstrap --variant=%s --include=%s %s %s; %s", base.Variant, strings.Join(base.Packages, ","), base.Suite, base.Mirror, base.SetupScript())},
		{nodeLayer, "npm pack node-linux-" + o.Arch + "@" + base.NodeVersion + " (bin/node → /usr/local/bin/node)"},
		{pcsyncLayer, "go build ./cmd/pcsync → " + images.ServerPath},
	}, ConfigOf(baseSpec, base, o.Version), o.Arch)
	if err != nil {
		return nil, fmt.Errorf("image %s: %w", images.Base, err)
	}
	if o.Verify {
		if _, err := b.verify(ctx, baseSpec, []string{pcsyncTree, nodeTree, rootfs}, []string{"/bin/sh", "-ec", baseCheck}, "ok"); err != nil {
			return nil, err
		}
	}
	baseElapsed := time.Since(start)

	var out []Built
	for _, s := range specs {
		start := time.Now()
		got := Built{Name: s.Name}
		switch {
		case s.From == "":
			got.Image, got.Elapsed = baseImg, baseElapsed
			out = append(out, got)
			continue
		case s.Package != "":
			cliTree, cliLayer, err := b.cli(ctx, s, nodeTree)
			if err != nil {
				return nil, fmt.Errorf("image %s: %w", s.Name, err)
			}
			if got.Image, err = assemble(baseImg, []step{{cliLayer, "npm " + strings.Join(s.NPMInstallArgs("/usr/local"), " ")}},
				ConfigOf(s, base, o.Version), o.Arch); err != nil {
				return nil, fmt.Errorf("image %s: %w", s.Name, err)
			}
			if o.Verify {
				trees := []string{cliTree, pcsyncTree, nodeTree, rootfs}
				if got.CLIVersion, err = b.verify(ctx, s, trees, []string{"/usr/local/bin/" + s.Binary, "--version"}, s.Version); err != nil {
					return nil, err
				}
				if probe := s.ACPProbe(); probe != nil {
					if _, err := b.verify(ctx, s, trees, probe, `"version":"`+s.ACP.Version+`"`); err != nil {
						return nil, err
					}
				}
			}
		default:
			if got.Image, err = assemble(baseImg, nil, ConfigOf(s, base, o.Version), o.Arch); err != nil {
				return nil, fmt.Errorf("image %s: %w", s.Name, err)
			}
		}
		got.Elapsed = time.Since(start)
		o.Logger.Info("built", "image", s.Name, "elapsed", got.Elapsed.Round(time.Millisecond))
		out = append(out, got)
	}
	return out, nil
}

// selectImages returns the catalog's images that names name, in catalog
// order, or all of them when names is empty.
func selectImages(names []string) ([]images.Spec, error) {
	if len(names) == 0 {
		return images.All(), nil
	}
	want := map[string]bool{}
	for _, n := range names {
		if _, err := images.Lookup(n); err != nil {
			return nil, err
		}
		want[n] = true
	}
	var out []images.Spec
	for _, s := range images.All() {
		if want[s.Name] {
			out = append(out, s)
		}
	}
	return out, nil
}
