package sandbox

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pcsync/pcsync/pkg/sandbox/leasepod"
)

// TestLeaseTo: to moves only from the state the lease is in, along the
// transition table; a change the table does not list panics.
func TestLeaseTo(t *testing.T) {
	for _, tc := range []struct {
		at, from, next LeaseState
		want           string // "moved", "stayed" or "panic"
	}{
		{LeasePending, LeasePending, LeaseReady, "moved"},
		{LeasePending, LeasePending, LeaseEnding, "moved"},
		{LeaseReady, LeaseReady, LeaseDraining, "moved"},
		{LeaseReady, LeaseReady, LeaseEnding, "moved"},
		{LeaseDraining, LeaseDraining, LeaseEnding, "moved"},
		{LeaseEnding, LeaseEnding, LeaseGone, "moved"},
		// An expiry ended the lease while its pod started.
		{LeaseEnding, LeasePending, LeaseReady, "stayed"},
		{LeaseReady, LeaseReady, LeasePending, "panic"},
		{LeaseDraining, LeaseDraining, LeaseReady, "panic"},
		{LeaseGone, LeaseGone, LeaseEnding, "panic"},
		{LeasePending, LeasePending, LeaseGone, "panic"},
	} {
		t.Run(fmt.Sprintf("%s:%s→%s", tc.at, tc.from, tc.next), func(t *testing.T) {
			l := newLease(leasepod.Record{ID: "pcsync-sbx-test"})
			l.state = tc.at
			got := func() (got string) {
				defer func() {
					if recover() != nil {
						got = "panic"
					}
				}()
				if l.to(tc.from, tc.next) {
					return "moved"
				}
				return "stayed"
			}()
			if got != tc.want {
				t.Errorf("to: %s, want %s", got, tc.want)
			}
		})
	}
}

// TestLeaseDrain: every caller of drain gets the same channel, closed once
// the last execute in flight is done; a lease that is draining takes no new
// execute; one with nothing in flight is idle at once.
func TestLeaseDrain(t *testing.T) {
	l := newLease(leasepod.Record{ID: "pcsync-sbx-test"})
	if !l.to(LeasePending, LeaseReady) {
		t.Fatal("pending → ready refused")
	}
	for range 2 {
		if err := l.begin(); err != nil {
			t.Fatal(err)
		}
	}
	first, second := l.drain(), l.drain()
	if first != second {
		t.Fatal("two drains got two channels: the first caller would wait on one nobody closes")
	}
	if err := l.begin(); err == nil {
		t.Error("a draining lease took a new execute")
	}
	l.done()
	if isClosed(first) {
		t.Error("idle with an execute still in flight")
	}
	l.done()
	if !isClosed(first) {
		t.Error("not idle once the executes in flight are done")
	}

	quiet := newLease(leasepod.Record{ID: "pcsync-sbx-quiet"})
	quiet.to(LeasePending, LeaseReady)
	if !isClosed(quiet.drain()) {
		t.Error("a lease with nothing in flight is not idle at once")
	}
	if diff := cmp.Diff(LeaseDraining, quiet.State()); diff != "" {
		t.Errorf("state (-want +got):\n%s", diff)
	}
}

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
