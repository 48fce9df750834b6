package spool

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestDaemonRemovesTempFilesOfAKilledDaemon: a daemon killed while writing
// left temp files (a result's, one of them a second link of the result;
// state files'); the next daemon removes them at start and nothing else: a
// spool writer's temp file and an agent's files in its working directory
// stay.
func TestDaemonRemovesTempFilesOfAKilledDaemon(t *testing.T) {
	h := newHarness(t, "")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	write := func(path string) {
		must(os.MkdirAll(filepath.Dir(path), 0o700))
		must(os.WriteFile(path, []byte("{}\n"), 0o600))
	}
	gone := []string{
		filepath.Join(h.spool, ".a.result.json.123.tmp"),
		filepath.Join(h.spool, ".b.result.json.456.tmp"),
		filepath.Join(h.state, ".status.json.7.tmp"),
		filepath.Join(h.state, "runs", "b", ".state.json.8.tmp"),
		filepath.Join(h.state, "usage", "claude_local", ".s-1.json.9.tmp"),
	}
	kept := []string{
		filepath.Join(h.spool, "a.result.json"),
		filepath.Join(h.spool, ".c.yaml.tmp"),
		filepath.Join(h.spool, ".pcsync-doctor-11.tmp"),
		filepath.Join(h.state, "work", "b", ".notes.md.10.tmp"),
	}
	write(kept[0])
	must(os.MkdirAll(h.state, 0o700))
	must(os.Link(kept[0], gone[0]))
	for _, p := range append(gone[1:], kept[1:]...) {
		write(p)
	}
	h.once()
	var left []string
	must(filepath.WalkDir(h.dir, func(path string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() && (slices.Contains(gone, path) || slices.Contains(kept, path)) {
			left = append(left, path)
		}
		return err
	}))
	want := slices.Clone(kept)
	slices.Sort(want)
	slices.Sort(left)
	if diff := cmp.Diff(want, left); diff != "" {
		t.Errorf("files left after the daemon started (-want +got):\n%s", diff)
	}
}
