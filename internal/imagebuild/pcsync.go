package imagebuild

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/pcsync/pcsync/pkg/images"
)

// pcsync builds pcsync (static, CGO_ENABLED=0, as the Dockerfile's Go
// stage) from RepoRoot on every call and returns the layer that holds it at
// images.ServerPath, cached by the binary's sha256, its tree and its layer.
func (b *builder) pcsync(ctx context.Context) (string, v1.Layer, error) {
	if b.o.RepoRoot == "" {
		return "", nil, fmt.Errorf("pcsync: no repository root (Options.RepoRoot)")
	}
	if err := os.MkdirAll(b.o.CacheDir, 0o755); err != nil {
		return "", nil, fmt.Errorf("pcsync: %w", err)
	}
	tmp, err := os.MkdirTemp(b.o.CacheDir, "pcsync-build-")
	if err != nil {
		return "", nil, fmt.Errorf("pcsync: %w", err)
	}
	defer os.RemoveAll(tmp)
	bin := filepath.Join(tmp, "pcsync")
	b.o.Logger.Info("go build ./cmd/pcsync", "version", b.o.Version)
	gobuild := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags", "-s -w -X main.commit="+b.o.Version, "-o", bin, "./cmd/pcsync")
	gobuild.Dir = b.o.RepoRoot
	gobuild.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+b.o.Arch, "GOFLAGS=-buildvcs=false")
	if err := run(gobuild); err != nil {
		return "", nil, fmt.Errorf("pcsync: %w", err)
	}
	sum, err := fileSHA256(bin)
	if err != nil {
		return "", nil, fmt.Errorf("pcsync: %w", err)
	}
	dir, err := ensure(ctx, b.o.CacheDir, "pcsync-"+sum[:16], func(ctx context.Context, tmp string) error {
		dst := filepath.Join(tmp, treeDir, filepath.FromSlash(images.ServerPath))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		if err := copyFile(bin, dst, 0o755); err != nil {
			return err
		}
		_, err := writeLayer(filepath.Join(tmp, treeDir), tmp, tarOptions{Root: true})
		return err
	})
	if err != nil {
		return "", nil, err
	}
	l, err := readLayer(dir)
	return filepath.Join(dir, treeDir), l, err
}

// fileSHA256 returns a file's sha256 in hex.
func fileSHA256(p string) (string, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("%s: %w", p, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// copyFile copies src to dst with mode.
func copyFile(src, dst string, mode os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return fmt.Errorf("%s: %w", dst, err)
	}
	if err := out.Close(); err != nil {
		return err
	}
	return os.Chmod(dst, mode)
}
