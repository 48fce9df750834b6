package kubeexec

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/pcsync/pcsync/internal/lib/safefile"
)

// recordAsEarlierDaemon writes a run's start record into the journal of
// stateDir, as a daemon does before creating the run's Job.
func recordAsEarlierDaemon(t testing.TB, stateDir, name string, m marker) {
	t.Helper()
	j, err := openJournal(stateDir, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer j.close()
	if err := j.start(name, m); err != nil {
		t.Fatal(err)
	}
}

// writeLegacyMarker writes the per-run marker file of pcsync versions
// before the journal (<state>/runs/<name>/kubernetes.json).
func writeLegacyMarker(t testing.TB, stateDir, name string, m marker) {
	t.Helper()
	data, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(stateDir, "runs", name, markerFile)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := safefile.WriteAtomic(p, data, 0o600, false); err != nil {
		t.Fatal(err)
	}
}

func quietJournal(t testing.TB, dir string) *journal {
	t.Helper()
	j, err := openJournal(dir, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.close() })
	return j
}

func liveNames(j *journal) []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	var names []string
	for n := range j.live {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// TestJournal: what a daemon records is what the next one reads, whatever
// the earlier one left: records of ended runs, a last line cut short by a
// crash, per-run marker files of older versions.
func TestJournal(t *testing.T) {
	m := func(id string) marker {
		return marker{RunID: id, Namespace: "acme", Job: "acme-ceo-" + id, Request: id + ".json", Nonce: "n-" + id}
	}
	tests := []struct {
		name string
		// before prepares the state directory.
		before func(t *testing.T, dir string)
		// do runs on the opened journal.
		do   func(t *testing.T, j *journal)
		want []string
	}{
		{"empty", nil, nil, nil},
		{"started runs", nil, func(t *testing.T, j *journal) {
			for _, id := range []string{"r1", "r2", "r3"} {
				if err := j.start(id, m(id)); err != nil {
					t.Fatal(err)
				}
			}
		}, []string{"r1", "r2", "r3"}},
		{"ended runs are dropped", nil, func(t *testing.T, j *journal) {
			for _, id := range []string{"r1", "r2", "r3"} {
				if err := j.start(id, m(id)); err != nil {
					t.Fatal(err)
				}
			}
			for _, id := range []string{"r1", "r3", "never-started"} {
				if err := j.end(id); err != nil {
					t.Fatal(err)
				}
			}
		}, []string{"r2"}},
		{"a last line cut short by a crash", func(t *testing.T, dir string) {
			j := quietJournal(t, dir)
			if err := j.start("r1", m("r1")); err != nil {
				t.Fatal(err)
			}
			j.close()
			f, err := os.OpenFile(filepath.Join(dir, JournalFile), os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.WriteString(`{"op":"start","name":"r2","marker":{"runId":"r`); err != nil {
				t.Fatal(err)
			}
			f.Close()
		}, func(t *testing.T, j *journal) {
			if err := j.start("r3", m("r3")); err != nil {
				t.Fatal(err)
			}
		}, []string{"r1", "r3"}},
		{"per-run marker files of older versions", func(t *testing.T, dir string) {
			writeLegacyMarker(t, dir, "old1", m("old1"))
			writeLegacyMarker(t, dir, "old2", m("old2"))
		}, func(t *testing.T, j *journal) {
			if got, ok := j.get("old1"); !ok || got != m("old1") {
				t.Errorf("get(old1) = %+v, %v; want the file's marker", got, ok)
			}
			if err := j.end("old2"); err != nil {
				t.Fatal(err)
			}
		}, []string{"old1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if tt.before != nil {
				tt.before(t, dir)
			}
			j := quietJournal(t, dir)
			if tt.do != nil {
				tt.do(t, j)
			}
			j.close()
			// The next daemon reads what this one recorded.
			again := quietJournal(t, dir)
			if diff := cmp.Diff(tt.want, liveNames(again)); diff != "" {
				t.Errorf("live runs after reopening (-want +got):\n%s", diff)
			}
			for _, name := range tt.want {
				if got, _ := again.get(name); got != m(name) {
					t.Errorf("marker of %s = %+v, want %+v", name, got, m(name))
				}
			}
			if legacy, _ := filepath.Glob(filepath.Join(dir, "runs", "*", markerFile)); len(legacy) > 0 {
				t.Errorf("per-run marker files left after they were taken in: %v", legacy)
			}
			fi, err := os.Stat(filepath.Join(dir, JournalFile))
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode().Perm() != 0o600 {
				t.Errorf("journal mode %v, want 0600", fi.Mode().Perm())
			}
		})
	}
}

// TestJournalRecordsTheJobUID: the created record holds the Job's UID and
// the next daemon reads it, through a compaction too; a created record of
// a pcsync older than UIDs (no "uid") still marks the run created, with no
// UID (adoption then goes by the nonce alone).
func TestJournalRecordsTheJobUID(t *testing.T) {
	dir := t.TempDir()
	j := quietJournal(t, dir)
	for _, id := range []string{"new", "old"} {
		if err := j.start(id, marker{RunID: id, Nonce: "n-" + id}); err != nil {
			t.Fatal(err)
		}
	}
	if err := j.created("new", "uid-1"); err != nil {
		t.Fatal(err)
	}
	j.close()
	// What a pcsync older than UIDs appends once the create is answered.
	f, err := os.OpenFile(filepath.Join(dir, JournalFile), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(`{"op":"created","name":"old"}` + "\n"); err != nil {
		t.Fatal(err)
	}
	f.Close()
	want := map[string]marker{
		"new": {RunID: "new", Nonce: "n-new", Created: true, UID: "uid-1"},
		"old": {RunID: "old", Nonce: "n-old", Created: true},
	}
	// Twice: the first open replays the records and compacts them into
	// start records; the second reads the compacted journal.
	for _, pass := range []string{"replayed", "compacted"} {
		again := quietJournal(t, dir)
		got := map[string]marker{}
		for _, id := range []string{"new", "old"} {
			got[id], _ = again.get(id)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s markers (-want +got):\n%s", pass, diff)
		}
		again.close()
	}
	// An adopting daemon records the UID of a Job it adopted by its nonce.
	j = quietJournal(t, dir)
	if err := j.created("old", "uid-2"); err != nil {
		t.Fatal(err)
	}
	if got, _ := j.get("old"); got.UID != "uid-2" {
		t.Errorf("UID after recording the adopted Job's: %q, want uid-2", got.UID)
	}
}

// TestJournalConcurrentStarts: runs recorded at the same time are all on
// disk when their start returns, and the records are whole lines.
func TestJournalConcurrentStarts(t *testing.T) {
	dir := t.TempDir()
	j := quietJournal(t, dir)
	var want []string
	var wg sync.WaitGroup
	errs := make(chan error, 200)
	for i := range 200 {
		id := fmt.Sprintf("r%03d", i)
		want = append(want, id)
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- j.start(id, marker{RunID: id, Nonce: "n"})
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	data, err := os.ReadFile(filepath.Join(dir, JournalFile))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, line := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		var rec journalRecord
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("journal line %q: %v", line, err)
		}
		got = append(got, rec.Name)
	}
	slices.Sort(got)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("records on disk (-want +got):\n%s", diff)
	}
}

// TestJournalCompacts: a journal of many ended runs is rewritten with only
// the live ones.
func TestJournalCompacts(t *testing.T) {
	dir := t.TempDir()
	j := quietJournal(t, dir)
	j.compactAfter = 8
	if err := j.start("keep", marker{RunID: "keep"}); err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		id := fmt.Sprintf("r%d", i)
		if err := j.start(id, marker{RunID: id}); err != nil {
			t.Fatal(err)
		}
		if err := j.end(id); err != nil {
			t.Fatal(err)
		}
	}
	data, err := os.ReadFile(filepath.Join(dir, JournalFile))
	if err != nil {
		t.Fatal(err)
	}
	if lines := strings.Count(string(data), "\n"); lines > 2*8+2 {
		t.Errorf("journal has %d lines after 50 runs started and ended, want it compacted to at most %d", lines, 2*8+2)
	}
	j.close()
	if diff := cmp.Diff([]string{"keep"}, liveNames(quietJournal(t, dir))); diff != "" {
		t.Errorf("live runs (-want +got):\n%s", diff)
	}
}

// BenchmarkRecordStarts200 records 200 runs starting at once: in the run
// journal (group commit: one write and fdatasync for the runs queued
// meanwhile) and, as the peer, as one durable marker file per run (temp
// file, fsync, rename, directory fsync), which is what pcsync did before
// the journal. ms-per-200 is the time until the last of them is on disk.
func BenchmarkRecordStarts200(b *testing.B) {
	const n = 200
	burst := func(b *testing.B, setup func(dir string) (record func(i int) error, done func())) {
		var total time.Duration
		for range b.N {
			b.StopTimer()
			record, done := setup(b.TempDir())
			var wg sync.WaitGroup
			errs := make(chan error, n)
			gate := make(chan struct{})
			for i := range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-gate
					errs <- record(i)
				}()
			}
			b.StartTimer()
			start := time.Now()
			close(gate)
			wg.Wait()
			total += time.Since(start)
			b.StopTimer()
			done()
			close(errs)
			for err := range errs {
				if err != nil {
					b.Fatal(err)
				}
			}
		}
		b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms-per-200")
	}
	b.Run("journal", func(b *testing.B) {
		burst(b, func(dir string) (func(int) error, func()) {
			j, err := openJournal(dir, slog.New(slog.DiscardHandler))
			if err != nil {
				b.Fatal(err)
			}
			return func(i int) error {
				id := fmt.Sprintf("r%03d", i)
				return j.start(id, marker{RunID: id, Namespace: "acme", Job: "acme-ceo-" + id, Request: id + ".json", Nonce: newNonce()})
			}, func() { j.close() }
		})
	})
	b.Run("file-per-run", func(b *testing.B) {
		burst(b, func(dir string) (func(int) error, func()) {
			return func(i int) error {
				id := fmt.Sprintf("r%03d", i)
				data, err := json.Marshal(marker{RunID: id, Namespace: "acme", Job: "acme-ceo-" + id, Request: id + ".json", Nonce: newNonce()})
				if err != nil {
					return err
				}
				p := filepath.Join(dir, "runs", id, markerFile)
				if err := safefile.MkdirAll(filepath.Dir(p)); err != nil {
					return err
				}
				return safefile.WriteAtomic(p, data, 0o600, true)
			}, func() {}
		})
	})
}

// TestJournalOneDaemonPerStateDir: a second executor on the same state
// directory is refused while the first holds the journal, and gets it once
// the first closes it.
func TestJournalOneDaemonPerStateDir(t *testing.T) {
	dir := t.TempDir()
	first := quietJournal(t, dir)
	if _, err := openJournal(dir, slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), "another daemon uses this state directory") {
		t.Fatalf("second open: %v; want it refused", err)
	}
	first.close()
	quietJournal(t, dir)
}

// TestJournalDropsFinishedRuns: the record of a run whose result file
// exists (its daemon stopped between the result and ending the record) is
// dropped when the journal opens.
func TestJournalDropsFinishedRuns(t *testing.T) {
	dir := t.TempDir()
	res := filepath.Join(dir, "done.result.json")
	j := quietJournal(t, dir)
	for _, name := range []string{"done", "running"} {
		if err := j.start(name, marker{RunID: name, Result: filepath.Join(dir, name+".result.json")}); err != nil {
			t.Fatal(err)
		}
	}
	j.close()
	if err := os.WriteFile(res, []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"running"}, liveNames(quietJournal(t, dir))); diff != "" {
		t.Errorf("live runs (-want +got):\n%s", diff)
	}
}
