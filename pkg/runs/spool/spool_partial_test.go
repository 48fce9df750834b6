package spool

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/pcsync/pcsync/pkg/result"
)

// TestPartialWriteIsRetried: a writer that does not rename writes half a
// request; as long as the file changed recently it is retried, not
// rejected, and it runs once complete. The file's time is set ahead so
// that "recently" does not depend on how fast this machine is.
func TestPartialWriteIsRetried(t *testing.T) {
	h := newHarness(t, "")
	h.start()
	p := filepath.Join(h.spool, "slowpoke.json")
	full := `{"apiVersion":"pcsync.io/v1alpha1","kind":"Run","company":"acme","agent":"coder","prompt":"hello"}`
	if err := os.WriteFile(p, []byte(full[:40]), 0o644); err != nil {
		t.Fatal(err)
	}
	future := time.Now().Add(time.Hour)
	if err := os.Chtimes(p, future, future); err != nil {
		t.Fatal(err)
	}
	h.waitFor("a retry of the partial request", func() bool { return h.sawEvent(EventRetrying, "slowpoke") })
	if err := os.WriteFile(p, []byte(full), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := h.result("slowpoke"); got.Status != result.StatusSucceeded {
		t.Errorf("status %s (%v), want succeeded", got.Status, deref(got.ErrorMessage))
	}
	if h.sawEvent(EventRejected, "slowpoke") {
		t.Error("the partial request was rejected")
	}
}

// TestStalePartialIsRejected: a broken file that has not changed for longer
// than the settle window is rejected without waiting.
func TestStalePartialIsRejected(t *testing.T) {
	h := newHarness(t, "")
	p := filepath.Join(h.spool, "stale.json")
	if err := os.WriteFile(p, []byte(`{"apiVersion":"pcsync.io/v1alpha1","kind":"Run","comp`), 0o644); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Minute)
	if err := os.Chtimes(p, old, old); err != nil {
		t.Fatal(err)
	}
	h.once()
	if got := h.result("stale"); got.Status != result.StatusRejected {
		t.Errorf("status %s, want rejected", got.Status)
	}
	if h.sawEvent(EventRetrying, "stale") {
		t.Error("a stale file was retried")
	}
}
