package spool

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/pcsync/pcsync/pkg/result"
)

// TestConcurrencyAndFIFO drops five requests for an agent with
// concurrency 2 whose runs block until released: runs start oldest first
// (modification time, then name), and the daemon never has more than two
// of them running.
func TestConcurrencyAndFIFO(t *testing.T) {
	h := newHarness(t, "")
	base := time.Now().Add(-time.Hour)
	// Names in the opposite order of their age, and a tie broken by name.
	order := []string{"r-e", "r-d", "r-b", "r-c", "r-a"}
	mtimes := map[string]time.Time{"r-e": base, "r-d": base.Add(time.Second), "r-b": base.Add(2 * time.Second),
		"r-c": base.Add(2 * time.Second), "r-a": base.Add(3 * time.Second)}
	for name, mt := range mtimes {
		h.drop(name+".yaml", request("slow", ""))
		if err := os.Chtimes(filepath.Join(h.spool, name+".yaml"), mt, mt); err != nil {
			t.Fatal(err)
		}
	}
	h.start()
	// Release runs one at a time, in the order they started.
	var started []string
	for len(started) < len(order) {
		h.waitFor(fmt.Sprintf("%d runs started", len(started)+1), func() bool {
			return len(h.kinds(EventStarting)) > len(started)
		})
		next := h.kinds(EventStarting)[len(started)]
		started = append(started, next)
		h.started(next, 1)
		h.releaseRun(next)
	}
	for _, n := range order {
		if r := h.result(n); r.Status != result.StatusSucceeded {
			t.Errorf("%s: %s %v", n, r.Status, deref(r.ErrorMessage))
		}
	}
	h.stop()
	if diff := cmp.Diff(order, started); diff != "" {
		t.Errorf("start order (-want +got):\n%s", diff)
	}
	running, peak := 0, 0
	for _, e := range h.recorded() {
		switch e.Kind {
		case EventStarting:
			running++
		case EventFinished:
			running--
		}
		peak = max(peak, running)
	}
	if peak != 2 {
		t.Errorf("at most %d runs were running at once, want exactly the concurrency 2", peak)
	}
}

// kinds lists, in order, the names of the events of a kind.
func (h *harness) kinds(kind EventKind) []string {
	var out []string
	for _, e := range h.recorded() {
		if e.Kind == kind {
			out = append(out, e.Name)
		}
	}
	return out
}
