// Package hostilespool builds the hostile spool of the tests (issue 15): a
// spool directory that someone with write access to it prepared to make
// pcsync touch files outside it, hang, or crash. Symbolic links and FIFOs
// cannot live in git, so the tests build it; testdata/spool-hostile/README.md
// lists what it holds.
package hostilespool

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Names of the requests of the corpus.
const (
	// Good is a valid request with nothing hostile beside it: it succeeds.
	Good = "good"
	// LinkLog is a valid request whose <name>.log is a symbolic link to
	// the outside file: rejected, the outside file untouched.
	LinkLog = "link-log"
	// HardLog is a valid request whose <name>.log is a hard link to the
	// outside file: rejected, the outside file untouched.
	HardLog = "hard-log"
	// FIFOLog is a valid request whose <name>.log is a FIFO: rejected,
	// never waited on.
	FIFOLog = "fifo-log"
	// ZeroResult has a <name>.result.json that is a symbolic link to
	// /dev/zero: skipped with a warning, never read.
	ZeroResult = "zero-result"
	// FIFOResult and FIFOResult2 have a <name>.result.json that is a FIFO:
	// skipped with a warning, never waited on (two of them used to stall
	// all admission).
	FIFOResult  = "fifo-result"
	FIFOResult2 = "fifo-result-2"
	// HardRequest is a request file that is a hard link to a request
	// outside the spool: rejected.
	HardRequest = "hard-request"
	// Escape is a valid request whose name holds terminal escape
	// sequences (its runId is EscapeRunID): it runs.
	Escape      = "esc-\x1b[31mred\x1b[0m-\x1b]0;pwned\x07"
	EscapeRunID = "escape"
	// DirJSON is a directory named like a request: not a request.
	DirJSON = "dir"
)

// Long is a request name of 245 characters: its result's temp file name
// would be longer than a file name can be.
var Long = strings.Repeat("l", 245)

// Corpus is a built hostile spool.
type Corpus struct {
	// Spool is the spool directory.
	Spool string
	// Outside is a file outside the spool that the links point at; its
	// content and modification time must never change.
	Outside      string
	OutsideBytes []byte
	OutsideMtime time.Time
}

// Build fills spool (an existing, empty directory) with the corpus; outside
// is a directory beside it for the files the links point at. request
// returns the content of a valid request with the given run id.
func Build(t testing.TB, spool, outside string, request func(runID string) []byte) Corpus {
	t.Helper()
	c := Corpus{Spool: spool, Outside: filepath.Join(outside, "precious.txt"), OutsideBytes: []byte("precious: must never change\n")}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("build the hostile spool: %v", err)
		}
	}
	must(os.WriteFile(c.Outside, c.OutsideBytes, 0o644))
	c.OutsideMtime = time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
	must(os.Chtimes(c.Outside, c.OutsideMtime, c.OutsideMtime))

	write := func(name, runID string) {
		t.Helper()
		tmp := filepath.Join(spool, ".tmp-request")
		must(os.WriteFile(tmp, request(runID), 0o644))
		must(os.Rename(tmp, filepath.Join(spool, name+".yaml")))
	}
	in := func(name string) string { return filepath.Join(spool, name) }

	write(Good, Good)
	write(LinkLog, LinkLog)
	must(os.Symlink(c.Outside, in(LinkLog+".log")))
	write(HardLog, HardLog)
	must(os.Link(c.Outside, in(HardLog+".log")))
	write(FIFOLog, FIFOLog)
	must(syscall.Mkfifo(in(FIFOLog+".log"), 0o644))
	write(ZeroResult, ZeroResult)
	must(os.Symlink("/dev/zero", in(ZeroResult+".result.json")))
	for _, n := range []string{FIFOResult, FIFOResult2} {
		write(n, n)
		must(syscall.Mkfifo(in(n+".result.json"), 0o644))
	}
	req := filepath.Join(outside, "request.yaml")
	must(os.WriteFile(req, request(HardRequest), 0o644))
	must(os.Link(req, in(HardRequest+".yaml")))
	write(Long, "long")
	write(Escape, EscapeRunID)
	must(os.Mkdir(in(DirJSON+".json"), 0o755))
	return c
}

// CheckOutside fails t when the outside file's content or modification time
// changed.
func (c Corpus) CheckOutside(t testing.TB) {
	t.Helper()
	data, err := os.ReadFile(c.Outside)
	if err != nil {
		t.Fatalf("outside file: %v", err)
	}
	if string(data) != string(c.OutsideBytes) {
		t.Errorf("the file outside the spool was written: %q, want %q", data, c.OutsideBytes)
	}
	fi, err := os.Stat(c.Outside)
	if err != nil {
		t.Fatal(err)
	}
	if !fi.ModTime().Equal(c.OutsideMtime) {
		t.Errorf("the file outside the spool was modified at %s (was %s)", fi.ModTime(), c.OutsideMtime)
	}
}
