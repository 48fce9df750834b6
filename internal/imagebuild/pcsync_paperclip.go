package imagebuild

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/pcsync/pcsync/pkg/images"
)

// paperclipPackage is one of pcsync's Paperclip packages that pcsync's own
// image carries: its source directory in the repository, the script that
// builds it, the variable that names the script's output directory, and
// the directory under images.PaperclipDir it goes to.
type paperclipPackage struct {
	src, script, outEnv, dest string
}

var paperclipPackages = []paperclipPackage{
	{"integrations/paperclip", "build.sh", "PAPERCLIP_ADAPTER_DIR", "adapter"},
	{"integrations/paperclip-sandbox", "build.sh", "PAPERCLIP_PLUGIN_DIR", "plugin"},
}

// paperclipLayer builds the adapter and the sandbox plugin with their
// build scripts (Node from hack/node/install.sh, npm from the registry) and
// returns the layer that holds them under images.PaperclipDir, cached by
// the sha256 of their sources.
func (b *builder) paperclipLayer(ctx context.Context) (v1.Layer, error) {
	sum, err := paperclipSourcesSHA256(b.o.RepoRoot)
	if err != nil {
		return nil, fmt.Errorf("paperclip packages: %w", err)
	}
	key := cacheKey("pcsync-paperclip", struct{ Sources, Arch string }{sum, b.o.Arch})
	dir, err := ensure(ctx, b.o.CacheDir, key, func(ctx context.Context, tmp string) error {
		root := filepath.Join(tmp, treeDir, filepath.FromSlash(images.PaperclipDir))
		if err := os.MkdirAll(root, 0o755); err != nil {
			return err
		}
		for _, p := range paperclipPackages {
			b.o.Logger.Info("build "+p.src, "into", filepath.Join(images.PaperclipDir, p.dest))
			cmd := exec.CommandContext(ctx, "bash", filepath.Join(b.o.RepoRoot, p.src, p.script))
			cmd.Dir = b.o.RepoRoot
			cmd.Env = append(os.Environ(), p.outEnv+"="+filepath.Join(root, p.dest))
			if err := run(cmd); err != nil {
				return fmt.Errorf("%s: %w", p.src, err)
			}
		}
		_, err := writeLayer(filepath.Join(tmp, treeDir), tmp, tarOptions{Root: true})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("paperclip packages: %w", err)
	}
	return readLayer(dir)
}

// paperclipSourcesSHA256 hashes the paths and contents of the packages'
// sources: every file under their directories but node_modules and dist.
func paperclipSourcesSHA256(repo string) (string, error) {
	h := sha256.New()
	for _, p := range paperclipPackages {
		base := filepath.Join(repo, p.src)
		err := filepath.WalkDir(base, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && (d.Name() == "node_modules" || d.Name() == "dist") {
				return filepath.SkipDir
			}
			if !d.Type().IsRegular() {
				return nil
			}
			rel, _ := filepath.Rel(repo, path)
			sum, err := fileSHA256(path)
			if err != nil {
				return err
			}
			fmt.Fprintf(h, "%s %s\n", filepath.ToSlash(rel), sum)
			return nil
		})
		if err != nil {
			return "", err
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
