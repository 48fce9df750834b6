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
	base, err := b.base(ctx)
	if err != nil {
		return nil, err
	}
	baseElapsed := time.Since(start)

	var out []Built
	for _, s := range specs {
		start := time.Now()
		got := Built{Name: s.Name}
		switch {
		case s.From == "":
			got.Image, got.Elapsed = base.img, baseElapsed
			out = append(out, got)
			continue
		case s.Package != "":
			if got, err = b.cliImage(ctx, s, base); err != nil {
				return nil, err
			}
		default:
			var steps []step
			if s.Name == images.Pcsync {
				l, err := b.paperclipLayer(ctx)
				if err != nil {
					return nil, fmt.Errorf("image %s: %w", s.Name, err)
				}
				steps = []step{{l, "integrations/paperclip{,-sandbox}/build.sh into " + images.PaperclipDir}}
			}
			if got.Image, err = assemble(base.img, steps, ConfigOf(s, o.Base, o.Version), o.Arch); err != nil {
				return nil, fmt.Errorf("image %s: %w", s.Name, err)
			}
		}
		got.Elapsed = time.Since(start)
		o.Logger.Info("built", "image", s.Name, "elapsed", got.Elapsed.Round(time.Millisecond))
		out = append(out, got)
	}
	return out, nil
}

// baseImage is the built base image and the trees it was made of (the
// pcsync tree, the node tree and the root file system, in layer order from
// the top), which an agent image's verification runs on.
type baseImage struct {
	img      v1.Image
	nodeTree string
	trees    []string
}

// base builds the base image: the root file system, node and pcsync, and
// checks it when Options.Verify is set.
func (b *builder) base(ctx context.Context) (*baseImage, error) {
	o := b.o
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
	trees := []string{pcsyncTree, nodeTree, rootfs}
	if o.Verify {
		if _, err := b.verify(ctx, baseSpec, trees, []string{"/bin/sh", "-ec", baseCheck}, "ok"); err != nil {
			return nil, err
		}
	}
	return &baseImage{img: baseImg, nodeTree: nodeTree, trees: trees}, nil
}

// cliImage builds the agent image s, whose CLI is an npm package, on base,
// and checks it when Options.Verify is set: its CLI's version, and its ACP
// agent's when it has one.
func (b *builder) cliImage(ctx context.Context, s images.Spec, base *baseImage) (Built, error) {
	o := b.o
	got := Built{Name: s.Name}
	cliTree, cliLayer, err := b.cli(ctx, s, base.nodeTree)
	if err != nil {
		return got, fmt.Errorf("image %s: %w", s.Name, err)
	}
	if got.Image, err = assemble(base.img, []step{{cliLayer, "npm " + strings.Join(s.NPMInstallArgs("/usr/local"), " ")}},
		ConfigOf(s, o.Base, o.Version), o.Arch); err != nil {
		return got, fmt.Errorf("image %s: %w", s.Name, err)
	}
	if !o.Verify {
		return got, nil
	}
	trees := append([]string{cliTree}, base.trees...)
	if got.CLIVersion, err = b.verify(ctx, s, trees, []string{"/usr/local/bin/" + s.Binary, "--version"}, s.Version); err != nil {
		return got, err
	}
	if probe := s.ACPProbe(); probe != nil {
		if _, err := b.verify(ctx, s, trees, probe, `"version":"`+s.ACP.Version+`"`); err != nil {
			return got, err
		}
	}
	return got, nil
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
