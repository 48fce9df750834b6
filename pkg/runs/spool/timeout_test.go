package spool

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/pcsync/pcsync/pkg/result"
)

// TestTimeout: a run past its deadline gets SIGTERM and is timed_out.
func TestTimeout(t *testing.T) {
	h := newHarness(t, "")
	h.drop("late.yaml", request("slow", "timeoutSec: 1\n"))
	h.once()
	got := h.result("late")
	if got.Status != result.StatusTimedOut || deref(got.ErrorCode) != result.ErrTimeout || !got.TimedOut {
		t.Errorf("status %s errorCode %v timedOut %v, want timed_out timeout true", got.Status, deref(got.ErrorCode), got.TimedOut)
	}
	if deref(got.Signal) != "SIGTERM" {
		t.Errorf("signal %v, want SIGTERM", deref(got.Signal))
	}
	msg, _ := deref(got.ErrorMessage).(string)
	if !strings.Contains(msg, "timed out after 1s (the request's timeoutSec)") {
		t.Errorf("errorMessage %q does not explain the timeout", msg)
	}
}

// TestGraceThenKill: an agent that ignores SIGTERM gets SIGKILL once
// graceSec has passed. (The agent is known to ignore SIGTERM before it
// is stopped: it does so before it records its start.)
func TestGraceThenKill(t *testing.T) {
	h := newHarness(t, "")
	h.start()
	h.drop("mule.yaml", request("stubborn", ""))
	h.started("mule", 1)
	touch(t, filepath.Join(h.spool, "mule.cancel"))
	got := h.result("mule")
	if got.Status != result.StatusCancelled || deref(got.Signal) != "SIGKILL" {
		t.Errorf("status %s signal %v, want cancelled after SIGKILL", got.Status, deref(got.Signal))
	}
	msg, _ := deref(got.ErrorMessage).(string)
	if !strings.Contains(msg, "SIGKILL after 1s; it ended by SIGKILL") {
		t.Errorf("errorMessage %q does not tell the grace period and the kill", msg)
	}
}
