package spool

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pcsync/pcsync/internal/testing/hostilespool"
	"github.com/pcsync/pcsync/internal/testing/lockedbuf"
	"github.com/pcsync/pcsync/pkg/result"
	"github.com/pcsync/pcsync/pkg/runs"
)

// logBuffer collects a daemon's log lines.
type logBuffer struct{ lockedbuf.Buffer }

// lines returns the log lines at level that hold every one of words.
func (b *logBuffer) lines(level string, words ...string) []string {
	var out []string
next:
	for _, l := range strings.Split(b.String(), "\n") {
		if !strings.Contains(l, "level="+level) {
			continue
		}
		for _, w := range words {
			if !strings.Contains(l, w) {
				continue next
			}
		}
		out = append(out, l)
	}
	return out
}

// buildHostile builds the hostile corpus in the harness's spool.
func (h *harness) buildHostile() hostilespool.Corpus {
	outside := filepath.Join(h.dir, "outside")
	if err := os.Mkdir(outside, 0o755); err != nil {
		h.t.Fatal(err)
	}
	return hostilespool.Build(h.t, h.spool, outside, func(runID string) []byte {
		return []byte(request("coder", "runId: "+runID+"\n"))
	})
}

// runGuarded runs fn and fails the test when it does not return within the
// wait deadline (it would hang for ever otherwise).
func runGuarded(t *testing.T, what string, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn()
	}()
	select {
	case <-done:
	case <-time.After(waitDeadline):
		t.Fatalf("%s did not return: it hangs on the hostile spool", what)
	}
}

// TestHostileSpool is the corpus of issue 15 with the local executor: the
// daemon with Once ends by itself, touches nothing outside the spool, runs
// the good request, rejects the requests that own a hostile entry, skips
// the entries it cannot use with one warning each, and the listing answers.
func TestHostileSpool(t *testing.T) {
	h := newHarness(t, "")
	c := h.buildHostile()
	var logs logBuffer
	opts := h.options(true)
	opts.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	d, err := New(h.model, h.executor(), opts)
	if err != nil {
		t.Fatal(err)
	}
	runGuarded(t, "the daemon with Once", func() {
		if err := d.Run(context.Background()); err != nil {
			t.Errorf("daemon: %v", err)
		}
	})
	c.CheckOutside(t)

	read := func(name string) *result.RunResult {
		r, err := result.Read(runs.Paths{Spool: h.spool, Name: name}.Result())
		if err != nil {
			t.Errorf("result of %q: %v", name, err)
			return nil
		}
		return &r
	}
	for _, name := range []string{hostilespool.Good, hostilespool.Escape} {
		if r := read(name); r != nil && r.Status != result.StatusSucceeded {
			t.Errorf("%q: status %s (%v), want succeeded", name, r.Status, deref(r.ErrorMessage))
		}
	}
	for name, want := range map[string]string{
		hostilespool.LinkLog:     "link-log.log: not a regular file: a symbolic link",
		hostilespool.HardLog:     "hard-log.log: has 2 hard links",
		hostilespool.FIFOLog:     "fifo-log.log: not a regular file: a named pipe",
		hostilespool.HardRequest: "hard-request.yaml: has 2 hard links",
	} {
		r := read(name)
		if r == nil {
			continue
		}
		if r.Status != result.StatusRejected || r.ErrorMessage == nil || !strings.Contains(*r.ErrorMessage, want) {
			t.Errorf("%q: status %s, message %v; want rejected with %q", name, r.Status, deref(r.ErrorMessage), want)
		}
		if h.starts(name) != 0 {
			t.Errorf("%q was started", name)
		}
	}
	for name, words := range map[string][]string{
		hostilespool.ZeroResult:  {"zero-result.result.json", "symbolic link"},
		hostilespool.FIFOResult:  {"fifo-result.result.json", "named pipe"},
		hostilespool.FIFOResult2: {"fifo-result-2.result.json", "named pipe"},
		hostilespool.Long:        {hostilespool.Long, "too long"},
	} {
		if n := len(logs.lines("WARN", words...)); n != 1 {
			t.Errorf("%.20s…: %d warnings naming it, want 1:\n%s", name, n, strings.Join(logs.lines("WARN", words[0]), "\n"))
		}
	}
	if n := h.starts("long") + h.starts(hostilespool.ZeroResult) + h.starts(hostilespool.FIFOResult); n != 0 {
		t.Errorf("%d runs of skipped requests started", n)
	}
	for _, name := range []string{hostilespool.Good} {
		for _, p := range []string{runs.Paths{Spool: h.spool, Name: name}.Result(), runs.Paths{Spool: h.spool, Name: name}.Log()} {
			if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o600 {
				t.Errorf("%s: mode %v (%v), want 0600", filepath.Base(p), fi.Mode(), err)
			}
		}
	}

	// The listing answers, and so does a second daemon.
	runGuarded(t, "ListRuns", func() {
		l, err := ListRuns(h.spool, h.state)
		if err != nil {
			t.Errorf("ListRuns: %v", err)
			return
		}
		got := map[string]string{}
		for _, r := range l.Runs {
			got[r.Name] = r.Status
		}
		if got[hostilespool.Good] != "succeeded" || got[hostilespool.FIFOResult] != ListIgnored || got[hostilespool.Long] != ListIgnored {
			t.Errorf("listing: %v", got)
		}
	})
	logs = logBuffer{}
	d, err = New(h.model, h.executor(), opts)
	if err != nil {
		t.Fatal(err)
	}
	runGuarded(t, "a second daemon with Once", func() {
		if err := d.Run(context.Background()); err != nil {
			t.Errorf("second daemon: %v", err)
		}
	})
	c.CheckOutside(t)
}

// TestHostileSpoolStopsOnCancel: a daemon serving the hostile spool stops
// when asked (SIGTERM cancels its context), whatever the spool holds.
func TestHostileSpoolStopsOnCancel(t *testing.T) {
	h := newHarness(t, "")
	c := h.buildHostile()
	h.start()
	h.result(hostilespool.Good)
	runGuarded(t, "stopping the daemon", h.stop)
	c.CheckOutside(t)
}
