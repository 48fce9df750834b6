// Command images builds pcsync's runtime images (pkg/images) without
// Docker, with internal/imagebuild, into an OCI layout, and pushes them to
// a registry when asked; `make images` runs it:
//
//	go run ./hack/images -out _out/images     # tagged images.Version, the release
//	go run ./hack/images -registry 127.0.0.1:5000/pcsync -push -tag v1.2.3
//	go run ./hack/images -images pcsync-agent-base,pcsync-agent-claude
//	go run ./hack/images -list     # name and Dockerfile folder, in build order
//	go run ./hack/images -out '' -paperclip-stand-in   # and the tests' Paperclip stand-in (cache only)
//
// It prints a line per image: name, digest, compressed size, build time.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/pcsync/pcsync/internal/imagebuild"
	"github.com/pcsync/pcsync/pkg/images"
)

func main() {
	d := imagebuild.DefaultOptions()
	out := flag.String("out", "_out/images", "the OCI layout to write (empty: none)")
	tag := flag.String("tag", images.Version, "the images' tag and the build stamp of their pcsync (default the release version)")
	registry := flag.String("registry", "", "the registry to push to: host[:port][/path]")
	push := flag.Bool("push", false, "push to -registry")
	only := flag.String("images", "", "comma-separated image names (default: all)")
	cache := flag.String("cache", d.CacheDir, "the build cache")
	verify := flag.Bool("verify", true, "run each CLI's --version in a chroot of its image")
	paperclip := flag.Bool("paperclip-stand-in", false, "also build the tests' stand-in of Paperclip's published image ("+
		imagebuild.PaperclipPackage+"@"+imagebuild.PaperclipVersion+", imagebuild.PaperclipStandIn) into the cache; it is neither written nor pushed")
	list := flag.Bool("list", false, "print each image's name and Dockerfile folder, in build order, and exit (hack/images/docker.sh)")
	flag.Parse()
	if *list {
		for _, s := range images.All() {
			fmt.Println(s.Name, s.Dir)
		}
		return
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	if err := run(ctx, log, *out, *tag, *registry, *push, *only, *cache, *verify); err != nil {
		fmt.Fprintln(os.Stderr, "images:", err)
		os.Exit(1)
	}
	if *paperclip {
		if err := standIn(ctx, log, *tag, *cache); err != nil {
			fmt.Fprintln(os.Stderr, "images:", err)
			os.Exit(1)
		}
	}
}

// standIn builds the Paperclip stand-in on the base (both cached).
func standIn(ctx context.Context, log *slog.Logger, tag, cache string) error {
	o := imagebuild.DefaultOptions()
	o.CacheDir, o.Version, o.Verify, o.Logger, o.Images = cache, tag, false, log, []string{images.Base}
	start := time.Now()
	built, err := imagebuild.Build(ctx, o)
	if err != nil {
		return err
	}
	img, err := imagebuild.PaperclipStandIn(ctx, o, built[0].Image, imagebuild.PaperclipVersion)
	if err != nil {
		return err
	}
	digest, size, err := summary(img)
	if err != nil {
		return fmt.Errorf("paperclip stand-in: %w", err)
	}
	fmt.Printf("%-24s %s %7.1f MB %6.1fs (cache only)\n", "paperclip (stand-in)", digest, float64(size)/1e6, time.Since(start).Seconds())
	return nil
}

// run builds, writes and pushes.
func run(ctx context.Context, log *slog.Logger, out, tag, registry string, push bool, only, cache string, verify bool) error {
	if push && registry == "" {
		return fmt.Errorf("-push needs -registry (REGISTRY=host[:port]/org)")
	}
	o := imagebuild.DefaultOptions()
	o.CacheDir, o.Version, o.Verify, o.Logger = cache, tag, verify, log
	if only != "" {
		o.Images = strings.Split(only, ",")
	}
	start := time.Now()
	built, err := imagebuild.Build(ctx, o)
	if err != nil {
		return err
	}
	if out != "" {
		if err := imagebuild.WriteLayout(out, tag, built); err != nil {
			return err
		}
	}
	if push {
		if _, err := imagebuild.Push(ctx, registry, tag, built, imagebuild.DefaultPushOptions()); err != nil {
			return err
		}
	}
	for _, b := range built {
		digest, size, err := summary(b.Image)
		if err != nil {
			return fmt.Errorf("image %s: %w", b.Name, err)
		}
		where := out
		if push {
			where = registry + "/" + b.Name + ":" + tag
		}
		fmt.Printf("%-24s %s %7.1f MB %6.1fs %s %s\n", b.Name, digest, float64(size)/1e6, b.Elapsed.Seconds(), where, b.CLIVersion)
	}
	fmt.Printf("%d images in %.1fs\n", len(built), time.Since(start).Seconds())
	return nil
}

// summary returns an image's digest and the sum of its compressed layers'
// sizes.
func summary(img v1.Image) (v1.Hash, int64, error) {
	digest, err := img.Digest()
	if err != nil {
		return v1.Hash{}, 0, err
	}
	layers, err := img.Layers()
	if err != nil {
		return v1.Hash{}, 0, err
	}
	var size int64
	for _, l := range layers {
		n, err := l.Size()
		if err != nil {
			return v1.Hash{}, 0, err
		}
		size += n
	}
	return digest, size, nil
}
