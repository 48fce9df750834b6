package sandbox

import (
	"fmt"
	"testing"
	"time"

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
		{LeaseReady, LeaseReady, LeaseSuspending, "moved"},
		{LeaseSuspending, LeaseSuspending, LeaseSuspended, "moved"},
		{LeaseSuspending, LeaseSuspending, LeaseReady, "moved"},
		{LeaseSuspended, LeaseSuspended, LeaseResuming, "moved"},
		{LeaseSuspended, LeaseSuspended, LeaseEnding, "moved"},
		{LeaseResuming, LeaseResuming, LeaseReady, "moved"},
		{LeaseResuming, LeaseResuming, LeaseSuspended, "moved"},
		// A release ended the lease while it was suspended.
		{LeaseEnding, LeaseSuspended, LeaseResuming, "stayed"},
		{LeaseSuspended, LeaseSuspended, LeaseReady, "panic"},
		{LeasePending, LeasePending, LeaseSuspending, "panic"},
		{LeaseDraining, LeaseDraining, LeaseSuspending, "panic"},
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

// TestLeaseBeginSuspend: only a ready kept lease with no command in flight
// and none for its idle time begins a suspend; the executes that come
// meanwhile wait on one channel, closed when the suspend ends either way.
func TestLeaseBeginSuspend(t *testing.T) {
	const idle = time.Minute
	now := time.Now()
	for _, tc := range []struct {
		name    string
		keep    bool
		state   LeaseState
		running int
		used    time.Duration // ago
		want    bool
	}{
		{name: "idle", keep: true, state: LeaseReady, used: idle, want: true},
		{name: "not kept", state: LeaseReady, used: idle},
		{name: "used lately", keep: true, state: LeaseReady, used: idle - time.Second},
		{name: "running", keep: true, state: LeaseReady, running: 1, used: 2 * idle},
		{name: "draining", keep: true, state: LeaseDraining, used: 2 * idle},
		{name: "suspended", keep: true, state: LeaseSuspended, used: 2 * idle},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := leasepod.Record{ID: "pcsync-sbx-test"}
			if tc.keep {
				r.Keep = &leasepod.Keep{IdleSec: 60, Size: "1Gi"}
			}
			l := newLease(r)
			l.state, l.running, l.lastUsed = tc.state, tc.running, now.Add(-tc.used)
			_, ok := l.beginSuspend(idle, now)
			if ok != tc.want {
				t.Fatalf("beginSuspend: %v, want %v", ok, tc.want)
			}
			if !ok {
				return
			}
			if err := l.begin(); err == nil {
				t.Error("an execute began on a suspending lease")
			}
			wait := l.changing()
			if wait == nil {
				t.Fatal("no channel to wait on while suspending")
			}
			l.to(LeaseSuspending, LeaseSuspended)
			select {
			case <-wait:
			default:
				t.Error("the suspend ended and its waiters still wait")
			}
			if l.changing() != nil {
				t.Error("a suspended lease has a change under way")
			}
		})
	}
}
