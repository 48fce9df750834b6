package imagebuild

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"golang.org/x/sys/unix"

	"github.com/pcsync/pcsync/pkg/images"
)

// rootfsDir is the base's root file system inside its cache entry.
const rootfsDir = "rootfs"

// baseSkip leaves out of the base layer what a container runtime provides
// (/dev, /proc, /sys, /etc/hostname and /etc/resolv.conf) and what is
// scratch space (/tmp, /run), keeping the directories themselves.
var baseSkip = skipUnder([]string{"dev", "proc", "sys", "tmp", "run"}, "etc/hostname", "etc/resolv.conf")

// baseRootfs returns the cache entry of the base's root file system: Suite
// with Variant and Packages by debootstrap, upgraded from Sources, then
// SetupScript in a chroot,
// packed as a layer. It returns the entry's directory and its layer.
func (b *builder) baseRootfs(ctx context.Context) (string, v1.Layer, error) {
	base := b.o.Base
	key := cacheKey("base", struct {
		Suite, Variant, Mirror, Arch string
		Sources, Packages            []string
		Setup                        string
	}{base.Suite, base.Variant, base.Mirror, b.o.Arch, base.Sources, base.Packages, base.SetupScript()})
	dir, err := ensure(ctx, b.o.CacheDir, key, func(ctx context.Context, tmp string) error {
		root := filepath.Join(tmp, rootfsDir)
		b.o.Logger.Info("debootstrap", "suite", base.Suite, "variant", base.Variant, "packages", strings.Join(base.Packages, ","), "dir", root)
		deb := exec.CommandContext(ctx, "debootstrap", "--variant="+base.Variant, "--arch="+b.o.Arch,
			"--include="+strings.Join(base.Packages, ","), base.Suite, root, base.Mirror)
		if err := run(deb); err != nil {
			return err
		}
		if err := upgrade(ctx, root, base); err != nil {
			return err
		}
		setup := exec.CommandContext(ctx, "chroot", root, "/bin/sh", "-ec", base.SetupScript())
		setup.Env = []string{"PATH=" + base.Path, "LC_ALL=C"}
		if err := run(setup); err != nil {
			return err
		}
		_, err := writeLayer(root, tmp, tarOptions{Skip: baseSkip})
		return err
	})
	if err != nil {
		return "", nil, err
	}
	l, err := readLayer(dir)
	return filepath.Join(dir, rootfsDir), l, err
}

// upgrade writes base.Sources to the root file system's apt sources and
// upgrades its packages from them (apt-get update and upgrade in a chroot,
// with /proc mounted for the packages' scripts).
func upgrade(ctx context.Context, root string, base images.BaseSpec) error {
	list := strings.Join(base.Sources, "\n") + "\n"
	if err := os.WriteFile(filepath.Join(root, "etc", "apt", "sources.list"), []byte(list), 0o644); err != nil {
		return fmt.Errorf("apt sources: %w", err)
	}
	proc := filepath.Join(root, "proc")
	if err := unix.Mount("proc", proc, "proc", 0, ""); err != nil {
		return fmt.Errorf("mount proc on %s: %w", proc, err)
	}
	defer unmount(proc)
	apt := exec.CommandContext(ctx, "chroot", root, "/bin/sh", "-ec",
		"apt-get update -qq && apt-get upgrade -y -qq -o Dpkg::Options::=--force-confold && apt-get clean")
	apt.Env = []string{"PATH=" + base.Path, "LC_ALL=C", "DEBIAN_FRONTEND=noninteractive"}
	return run(apt)
}
