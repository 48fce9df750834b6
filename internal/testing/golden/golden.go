// Package golden holds what the tests that compare output with files in
// testdata share: the walk over a corpus of cases (testdata/<corpus>/<case>)
// and the comparison with a golden file that -update rewrites. Each test
// package defines its own -update flag and passes its value.
package golden

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Cases runs fn as a subtest, named for the case, for each directory under
// root, with the case's directory.
func Cases(t *testing.T, root string, fn func(t *testing.T, dir string)) {
	t.Helper()
	for _, dir := range Dirs(t, root) {
		t.Run(filepath.Base(dir), func(t *testing.T) { fn(t, dir) })
	}
}

// Dirs lists the case directories under root, sorted.
func Dirs(t testing.TB, root string) []string {
	t.Helper()
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	var dirs []string
	for _, e := range entries {
		if e.IsDir() {
			dirs = append(dirs, filepath.Join(root, e.Name()))
		}
	}
	return dirs
}

// File compares got with the golden file at path (-want +got), or, with
// update, writes got there.
func File(t testing.TB, path string, got []byte, update bool) {
	t.Helper()
	if update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run the test with -update to create it)", err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s differs (-want +got):\n%s", path, diff)
	}
}
