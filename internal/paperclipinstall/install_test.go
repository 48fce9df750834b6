package paperclipinstall

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// packages writes an adapter and a plugin package under a new From.
func packages(t *testing.T, adapterVersion, pluginVersion string) string {
	t.Helper()
	from := t.TempDir()
	for dir, pkg := range map[string]Package{
		AdapterDir: {"@pcsync/paperclip-adapter", adapterVersion},
		PluginDir:  {"@pcsync/paperclip-sandbox", pluginVersion},
	} {
		write(t, filepath.Join(from, dir, "package.json"), mustJSON(t, pkg))
		write(t, filepath.Join(from, dir, "dist", "index.js"), "export {}\n")
		if err := os.MkdirAll(filepath.Join(from, dir, "node_modules", ".bin"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("../x/cli.js", filepath.Join(from, dir, "node_modules", ".bin", "x")); err != nil {
			t.Fatal(err)
		}
	}
	return from
}

func write(t *testing.T, path, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestInstall(t *testing.T) {
	other := `{"packageName":"hermes","localPath":"/x","version":"2.0.0","type":"hermes_local","installedAt":"2026-01-01T00:00:00Z","extra":true}`
	tests := []struct {
		name     string
		store    string // the store before; "" for none
		versions [2]string
		twice    bool
		want     Action
	}{
		{name: "fresh home", versions: [2]string{"0.1.0", "0.1.0"}, want: ActionInstalled},
		{name: "another adapter kept beside", store: "[" + other + "]", versions: [2]string{"0.1.0", "0.1.0"}, want: ActionInstalled},
		{name: "same version twice", versions: [2]string{"0.1.0", "0.1.0"}, twice: true, want: ActionKept},
		{name: "an older pcsync record", store: `[{"packageName":"@pcsync/paperclip-adapter","localPath":"/old","version":"0.0.9","type":"pcsync"},` + other + `]`,
			versions: [2]string{"0.1.0", "0.1.0"}, want: ActionUpdated},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			home, into := t.TempDir(), filepath.Join(t.TempDir(), "pcsync-paperclip")
			if tt.store != "" {
				write(t, filepath.Join(home, StoreFile), tt.store)
			}
			o := Options{From: packages(t, tt.versions[0], tt.versions[1]), Into: into, Home: home,
				Now: func() time.Time { return time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC) }}
			r, err := Install(o)
			if err == nil && tt.twice {
				r, err = Install(o)
			}
			if err != nil {
				t.Fatal(err)
			}
			if r.AdapterAction != tt.want {
				t.Errorf("adapter action %q, want %q", r.AdapterAction, tt.want)
			}
			wantReport := Report{Adapter: Package{"@pcsync/paperclip-adapter", tt.versions[0]}, Plugin: Package{"@pcsync/paperclip-sandbox", tt.versions[1]}, AdapterAction: tt.want}
			if d := cmp.Diff(wantReport, r); d != "" {
				t.Errorf("report (-want +got):\n%s", d)
			}
			checkStore(t, filepath.Join(home, StoreFile), into, tt.store != "" && strings.Contains(tt.store, "hermes"))
			for _, dir := range []string{AdapterDir, PluginDir} {
				if _, err := os.Stat(filepath.Join(into, dir, "dist", "index.js")); err != nil {
					t.Errorf("%s not copied: %v", dir, err)
				}
				if link, err := os.Readlink(filepath.Join(into, dir, "node_modules", ".bin", "x")); err != nil || link != "../x/cli.js" {
					t.Errorf("%s: symbolic link copied as %q, %v", dir, link, err)
				}
			}
		})
	}
}

// checkStore checks that the store holds one pcsync record pointing into
// into, and the other adapter's record unchanged when there was one.
func checkStore(t *testing.T, path, into string, other bool) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var recs []map[string]any
	if err := json.Unmarshal(data, &recs); err != nil {
		t.Fatal(err)
	}
	var pcsync, hermes int
	for _, r := range recs {
		switch r["type"] {
		case AdapterType:
			pcsync++
			if r["localPath"] != filepath.Join(into, AdapterDir) || r["version"] != "0.1.0" {
				t.Errorf("pcsync record %v", r)
			}
		case "hermes_local":
			hermes++
			if r["extra"] != true || r["installedAt"] != "2026-01-01T00:00:00Z" {
				t.Errorf("the other adapter's record changed: %v", r)
			}
		}
	}
	if pcsync != 1 || (other && hermes != 1) {
		t.Errorf("store %s: %d pcsync and %d other records:\n%s", path, pcsync, hermes, data)
	}
}

// A store that is not Paperclip's JSON array is an error naming it, and
// is left as it is.
func TestInstallRefusesABrokenStore(t *testing.T) {
	home := t.TempDir()
	store := filepath.Join(home, StoreFile)
	write(t, store, `{"not":"an array"}`)
	_, err := Install(Options{From: packages(t, "0.1.0", "0.1.0"), Into: t.TempDir(), Home: home})
	if err == nil || !strings.Contains(err.Error(), store) {
		t.Fatalf("error %v, want one naming %s", err, store)
	}
	if data, _ := os.ReadFile(store); string(data) != `{"not":"an array"}` {
		t.Errorf("store changed: %s", data)
	}
}

func TestInstallNeedsItsTargets(t *testing.T) {
	if _, err := Install(Options{From: packages(t, "0.1.0", "0.1.0")}); err == nil {
		t.Fatal("no error without --into and --paperclip-home")
	}
}

// A package directory that is a symbolic link (a build's output linked in
// place) is copied as the tree it points to.
func TestInstallFollowsALinkedPackage(t *testing.T) {
	real := packages(t, "0.1.0", "0.1.0")
	from := t.TempDir()
	for _, dir := range []string{AdapterDir, PluginDir} {
		if err := os.Symlink(filepath.Join(real, dir), filepath.Join(from, dir)); err != nil {
			t.Fatal(err)
		}
	}
	into := filepath.Join(t.TempDir(), "into")
	if _, err := Install(Options{From: from, Into: into, Home: t.TempDir()}); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{AdapterDir, PluginDir} {
		fi, err := os.Lstat(filepath.Join(into, dir, "dist", "index.js"))
		if err != nil || !fi.Mode().IsRegular() {
			t.Errorf("%s: dist/index.js not copied as a file: %v, %v", dir, fi, err)
		}
	}
}
