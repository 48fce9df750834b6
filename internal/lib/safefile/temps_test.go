package safefile

import (
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestIsTemp(t *testing.T) {
	for _, tc := range []struct {
		name, suffix string
		want         bool
	}{
		{".a.result.json.123.tmp", ".result.json", true},
		{".a.result.json.123.tmp", "", true},
		{".state.json.4294967295.tmp", "", true},
		{".a.json.123.tmp", ".result.json", false},      // another file's
		{".result.json.123.tmp", ".result.json", false}, // no base
		{".a.result.json..tmp", ".result.json", false},  // no digits
		{".a.result.json.12x.tmp", ".result.json", false},
		{"a.result.json.123.tmp", ".result.json", false}, // not hidden
		{".a.tmp", "", false},                            // a spool writer's
		{".a.result.json.123", ".result.json", false},
		{".123.tmp", "", false},
	} {
		if got := IsTemp(tc.name, tc.suffix); got != tc.want {
			t.Errorf("IsTemp(%q, %q) = %v, want %v", tc.name, tc.suffix, got, tc.want)
		}
	}
}

// TestRemoveTempsRemovesOnlyRegularTempFiles: a killed writer's temp
// files go (one a second link of a result), everything else stays: the
// result, another writer's temp names, a link or FIFO named like a temp.
func TestRemoveTempsRemovesOnlyRegularTempFiles(t *testing.T) {
	dir := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	write := func(name string) { must(os.WriteFile(filepath.Join(dir, name), []byte("x"), 0o600)) }
	write("r.result.json")
	must(os.Link(filepath.Join(dir, "r.result.json"), filepath.Join(dir, ".r.result.json.77.tmp")))
	write(".s.result.json.1234.tmp")
	write(".req.tmp")
	write(".t.json.99.tmp")
	must(os.Symlink(filepath.Join(dir, "r.result.json"), filepath.Join(dir, ".l.result.json.5.tmp")))
	must(syscall.Mkfifo(filepath.Join(dir, ".f.result.json.6.tmp"), 0o600))
	must(os.Mkdir(filepath.Join(dir, ".d.result.json.7.tmp"), 0o700))

	removed, err := RemoveTemps(dir, ".result.json")
	must(err)
	for i := range removed {
		removed[i] = filepath.Base(removed[i])
	}
	slices.Sort(removed)
	if diff := cmp.Diff([]string{".r.result.json.77.tmp", ".s.result.json.1234.tmp"}, removed); diff != "" {
		t.Errorf("removed (-want +got):\n%s", diff)
	}
	entries, err := os.ReadDir(dir)
	must(err)
	var left []string
	for _, de := range entries {
		left = append(left, de.Name())
	}
	want := []string{".d.result.json.7.tmp", ".f.result.json.6.tmp", ".l.result.json.5.tmp", ".req.tmp", ".t.json.99.tmp", "r.result.json"}
	if diff := cmp.Diff(want, left); diff != "" {
		t.Errorf("left in the directory (-want +got):\n%s", diff)
	}
	fi, err := os.Stat(filepath.Join(dir, "r.result.json"))
	must(err)
	if n := fi.Sys().(*syscall.Stat_t).Nlink; n != 1 {
		t.Errorf("the result has %d links after its temp name was removed, want 1", n)
	}
	if removed, err := RemoveTemps(filepath.Join(dir, "missing"), ""); err != nil || removed != nil {
		t.Errorf("RemoveTemps of a missing directory = %v, %v; want nothing, no error", removed, err)
	}
}
