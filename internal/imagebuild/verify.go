package imagebuild

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/pcsync/pcsync/pkg/images"
)

// verifyTimeout bounds one CLI's --version (a hung CLI must not hang the
// build); it is a safety net, not an expectation.
const verifyTimeout = 3 * time.Minute

// baseCheck is what verify runs in the base: its tools answer, and the
// user may write its home and the working directory.
const baseCheck = `node --version; pcsync version; tini --version; git --version; rg --version | head -1; ` +
	`base64 --version | head -1; tar --version | head -1; test -w "$HOME"; test -w "$PWD"; echo ok`

// verify runs argv in a chroot of the image (an overlay of its layers'
// trees, lowest last, with a scratch upper layer and /proc mounted), as
// the image's user, with its env and working directory, and returns the
// first line it prints; an error when it fails or does not print want.
func (b *builder) verify(ctx context.Context, s images.Spec, trees, argv []string, want string) (string, error) {
	cfg := s.Config(b.o.Base, b.o.Version)
	tmp, err := os.MkdirTemp(b.o.CacheDir, "verify-")
	if err != nil {
		return "", fmt.Errorf("verify %s: %w", s.Name, err)
	}
	defer os.RemoveAll(tmp)
	upper, work, merged := filepath.Join(tmp, "upper"), filepath.Join(tmp, "work"), filepath.Join(tmp, "merged")
	for _, d := range []string{upper, work, merged} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return "", fmt.Errorf("verify %s: %w", s.Name, err)
		}
	}
	opts := "lowerdir=" + strings.Join(trees, ":") + ",upperdir=" + upper + ",workdir=" + work
	if err := unix.Mount("overlay", merged, "overlay", 0, opts); err != nil {
		return "", fmt.Errorf("verify %s: mount overlay on %s (the kernel's overlay file system is needed): %w", s.Name, merged, err)
	}
	defer unmount(merged)
	proc := filepath.Join(merged, "proc")
	if err := unix.Mount("proc", proc, "proc", 0, ""); err != nil {
		return "", fmt.Errorf("verify %s: mount proc: %w", s.Name, err)
	}
	defer unmount(proc)

	uid, gid, err := parseUser(cfg.User)
	if err != nil {
		return "", fmt.Errorf("verify %s: %w", s.Name, err)
	}
	ctx, cancel := context.WithTimeout(ctx, verifyTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = cfg.Env
	cmd.Dir = cfg.WorkingDir
	cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: merged, Credential: &syscall.Credential{Uid: uid, Gid: gid, Groups: []uint32{}}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("verify %s: %s as %s: %w\n%s", s.Name, strings.Join(argv, " "), cfg.User, err, out)
	}
	if !strings.Contains(string(out), want) {
		return "", fmt.Errorf("verify %s: %s printed no %s:\n%s", s.Name, strings.Join(argv, " "), want, out)
	}
	first, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	return first, nil
}

// unmount detaches the mount at p (lazily when it is busy).
func unmount(p string) {
	if err := unix.Unmount(p, 0); err != nil {
		_ = unix.Unmount(p, unix.MNT_DETACH)
	}
}

// parseUser parses "uid:gid".
func parseUser(user string) (uint32, uint32, error) {
	u, g, ok := strings.Cut(user, ":")
	uid, err1 := strconv.ParseUint(u, 10, 32)
	gid, err2 := strconv.ParseUint(g, 10, 32)
	if !ok || err1 != nil || err2 != nil {
		return 0, 0, fmt.Errorf("user %q is not uid:gid", user)
	}
	return uint32(uid), uint32(gid), nil
}
