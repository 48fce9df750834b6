package imagebuild

import (
	"cmp"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"

	"github.com/pcsync/pcsync/pkg/images"
)

// Options configures Build.
type Options struct {
	// CacheDir holds the cached layers and root file systems
	// (default ${XDG_CACHE_HOME:-$HOME/.cache}/pcsync/images).
	CacheDir string
	// RepoRoot is the pcsync repository whose ./cmd/pcsync is built into
	// the base (default: the nearest folder holding go.mod, upwards from
	// the working directory).
	RepoRoot string
	// Version is the images' tag: their org.opencontainers.image.version
	// label and their pcsync's build stamp, -X main.commit (default
	// images.Version, the release).
	Version string
	// Arch is the images' Go architecture (default runtime.GOARCH); the
	// build runs what it installs, so it must be the host's.
	Arch string
	// Base is the base image's spec (default images.DefaultBase()).
	Base images.BaseSpec
	// Images names the images to build (default: all of images.All()); the
	// base is built whenever another image needs it.
	Images []string
	// Verify runs each agent image's CLI with --version, and sends its ACP
	// server (when it has one) the ACP initialize request
	// (images.Spec.ACPProbe), in a chroot of the image, as its user, and
	// fails the build when either does not answer (DefaultOptions: true).
	Verify bool
	// Logger gets a line per step (default slog.Default()).
	Logger *slog.Logger
}

// DefaultOptions returns the options Build uses for fields left zero, with
// Verify on.
func DefaultOptions() Options {
	cache := os.Getenv("XDG_CACHE_HOME")
	if cache == "" {
		home, _ := os.UserHomeDir()
		cache = filepath.Join(home, ".cache")
	}
	return Options{
		CacheDir: filepath.Join(cache, "pcsync", "images"),
		RepoRoot: findRepoRoot(),
		Version:  images.Version,
		Arch:     runtime.GOARCH,
		Base:     images.DefaultBase(),
		Verify:   true,
		Logger:   slog.Default(),
	}
}

// complete fills o's zero fields from DefaultOptions (Verify stays as
// given).
func (o Options) complete() Options {
	d := DefaultOptions()
	o.CacheDir = cmp.Or(o.CacheDir, d.CacheDir)
	o.RepoRoot = cmp.Or(o.RepoRoot, d.RepoRoot)
	o.Version = cmp.Or(o.Version, d.Version)
	o.Arch = cmp.Or(o.Arch, d.Arch)
	if o.Base.Suite == "" {
		o.Base = d.Base
	}
	if o.Logger == nil {
		o.Logger = d.Logger
	}
	return o
}

// findRepoRoot returns the nearest folder holding go.mod, upwards from the
// working directory, or "" when there is none.
func findRepoRoot() string {
	dir, err := os.Getwd()
	if err != nil {
		return ""
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}
