package spool

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pcsync/pcsync/pkg/result"
)

// TestCancel cancels a queued run (it never starts) and a running one (its
// process group gets SIGTERM), with the agent at concurrency 1.
func TestCancel(t *testing.T) {
	h := newHarness(t, `
  - name: single
    adapter: claude_local
    graceSec: 30
    env: {AGENT_MODE: block}
`)
	h.start()
	h.drop("first.yaml", request("single", ""))
	h.started("first", 1)
	h.drop("second.yaml", request("single", ""))
	h.waitFor("second queued", func() bool { return h.sawEvent(EventQueued, "second") })

	touch(t, filepath.Join(h.spool, "second.cancel"))
	got := h.result("second")
	if got.Status != result.StatusCancelled || deref(got.ErrorCode) != result.ErrCancelled || got.StartedAt != nil {
		t.Errorf("queued run: status %s errorCode %v startedAt %v, want cancelled, cancelled, never started",
			got.Status, deref(got.ErrorCode), got.StartedAt)
	}

	touch(t, filepath.Join(h.spool, "first.cancel"))
	got = h.result("first")
	if got.Status != result.StatusCancelled || deref(got.ErrorCode) != result.ErrCancelled || deref(got.Signal) != "SIGTERM" {
		t.Errorf("running run: status %s errorCode %v signal %v, want cancelled, cancelled, SIGTERM",
			got.Status, deref(got.ErrorCode), deref(got.Signal))
	}
	if msg, _ := deref(got.ErrorMessage).(string); !strings.Contains(msg, "cancelled by first.cancel") {
		t.Errorf("errorMessage %q does not say what cancelled the run", msg)
	}
	if got.SessionID == nil {
		t.Error("the session id of a cancelled run was lost")
	}
	h.stop()
	if n := h.starts("second"); n != 0 {
		t.Errorf("the cancelled queued run started %d times", n)
	}
}

// TestCancelBeforeSeen: a cancel file that is there before the request is
// read cancels the run before it starts.
func TestCancelBeforeSeen(t *testing.T) {
	h := newHarness(t, "")
	touch(t, filepath.Join(h.spool, "early.cancel"))
	h.drop("early.yaml", request("coder", ""))
	h.once()
	if got := h.result("early"); got.Status != result.StatusCancelled {
		t.Errorf("status %s, want cancelled", got.Status)
	}
	if n := h.starts("early"); n != 0 {
		t.Errorf("started %d times, want 0", n)
	}
}

func touch(t *testing.T, p string) {
	t.Helper()
	if err := os.WriteFile(p, nil, 0o644); err != nil {
		t.Fatal(err)
	}
}
