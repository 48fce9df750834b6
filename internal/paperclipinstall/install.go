package paperclipinstall

import (
	"cmp"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/pcsync/pcsync/pkg/images"
)

// AdapterType is the Paperclip adapter type of pcsync's adapter.
const AdapterType = "pcsync"

// Package directories under Options.From and Options.Into.
const (
	AdapterDir = "adapter"
	PluginDir  = "plugin"
)

// Options configure Install.
type Options struct {
	// From holds the packages (AdapterDir, PluginDir). Default
	// images.PaperclipDir, where pcsync's image has them.
	From string
	// Into is the directory the Paperclip container mounts at the same
	// path; each package is replaced there as a whole. Required.
	Into string
	// Home is Paperclip's home (PAPERCLIP_HOME), where its adapter store
	// is. Required.
	Home string
	// Logger gets one line per package. Default: discard.
	Logger *slog.Logger
	// Now is the clock of the store's installedAt. Default time.Now.
	Now func() time.Time
}

// DefaultOptions returns Options with the defaults set.
func DefaultOptions() Options {
	return Options{From: images.PaperclipDir, Logger: slog.New(slog.DiscardHandler), Now: time.Now}
}

func (o Options) complete() Options {
	d := DefaultOptions()
	o.From = cmp.Or(o.From, d.From)
	o.Logger = cmp.Or(o.Logger, d.Logger)
	if o.Now == nil {
		o.Now = d.Now
	}
	return o
}

// Package is one installed package: its npm name and version.
type Package struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

// Report is what Install did.
type Report struct {
	Adapter, Plugin Package
	// AdapterAction is what happened to the store's record of AdapterType.
	AdapterAction Action
}

// Install copies the adapter and the plugin from o.From into o.Into and
// records the adapter in Paperclip's store under o.Home. It is idempotent:
// a second run replaces the copies and keeps the record of the same
// version and path.
func Install(o Options) (Report, error) {
	o = o.complete()
	if o.Into == "" || o.Home == "" {
		return Report{}, fmt.Errorf("paperclip install: the target directory and Paperclip's home are required")
	}
	var r Report
	for _, p := range []struct {
		dir string
		pkg *Package
	}{{AdapterDir, &r.Adapter}, {PluginDir, &r.Plugin}} {
		src := filepath.Join(o.From, p.dir)
		pkg, err := ReadPackage(src)
		if err != nil {
			return r, err
		}
		*p.pkg = pkg
		if err := replaceTree(src, filepath.Join(o.Into, p.dir)); err != nil {
			return r, fmt.Errorf("paperclip install: %s %s: %w", pkg.Name, pkg.Version, err)
		}
	}
	store := filepath.Join(o.Home, StoreFile)
	action, err := upsertAdapter(store, adapterRecord{PackageName: r.Adapter.Name, LocalPath: filepath.Join(o.Into, AdapterDir),
		Version: r.Adapter.Version, Type: AdapterType}, o.Now())
	if err != nil {
		return r, fmt.Errorf("paperclip install: adapter %s: %w", r.Adapter.Name, err)
	}
	r.AdapterAction = action
	o.Logger.Info("adapter "+string(action), "type", AdapterType, "package", r.Adapter.Name, "version", r.Adapter.Version,
		"path", filepath.Join(o.Into, AdapterDir), "store", store)
	o.Logger.Info("plugin in place: Paperclip installs and loads it at start from PAPERCLIP_KUBERNETES_PLUGIN_PATH",
		"package", r.Plugin.Name, "version", r.Plugin.Version, "path", filepath.Join(o.Into, PluginDir))
	return r, nil
}

// ReadPackage reads the name and version of the package in dir.
func ReadPackage(dir string) (Package, error) {
	path := filepath.Join(dir, "package.json")
	data, err := os.ReadFile(path)
	if err != nil {
		return Package{}, fmt.Errorf("paperclip package: %w", err)
	}
	var p Package
	if err := json.Unmarshal(data, &p); err != nil {
		return Package{}, fmt.Errorf("paperclip package %s: %w", path, err)
	}
	if p.Name == "" || p.Version == "" {
		return Package{}, fmt.Errorf("paperclip package %s: no name or version", path)
	}
	return p, nil
}

// replaceTree copies src to a temporary directory beside dst, then puts it
// in dst's place, so that dst is never a partial copy.
func replaceTree(src, dst string) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dst), "."+filepath.Base(dst)+".tmp-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	// Files, directories and symbolic links (node_modules/.bin), modes as
	// in the image (read by all, executables kept); src may be a link.
	if err := os.CopyFS(tmp, os.DirFS(src)); err != nil {
		return err
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return err
	}
	old := tmp + ".old"
	if err := os.Rename(dst, old); err != nil && !os.IsNotExist(err) {
		return err
	}
	if err := os.Rename(tmp, dst); err != nil {
		return err
	}
	return os.RemoveAll(old)
}
