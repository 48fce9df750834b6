package spool

import (
	"strings"
	"testing"

	"github.com/pcsync/pcsync/pkg/result"
)

// TestSuspendedCompanyRejectsNewRuns: once acme is suspended (spec.suspend),
// a run already going goes on, also adopted by the next daemon, and
// finishes once; a new request is rejected with errorCode
// company_suspended, naming the company.
func TestSuspendedCompanyRejectsNewRuns(t *testing.T) {
	h := newHarness(t, "")
	h.start()
	h.drop("before.yaml", request("slow", ""))
	h.started("before", 1)
	h.stop()

	h.model.Companies[0].Spec.Suspend = true
	h.start()
	h.waitFor("adoption", func() bool { return h.sawEvent(EventAdopted, "before") })
	h.drop("after.yaml", request("coder", ""))
	got := h.result("after")
	if got.Status != result.StatusRejected || got.ErrorCode == nil || *got.ErrorCode != result.ErrCompanySuspended ||
		!strings.Contains(deref(got.ErrorMessage).(string), `company "acme" is suspended`) {
		t.Errorf("a new run of the suspended acme: %s %v %v, want rejected, company_suspended, naming acme",
			got.Status, deref(got.ErrorCode), deref(got.ErrorMessage))
	}
	h.releaseRun("before")
	if got := h.result("before"); got.Status != result.StatusSucceeded {
		t.Errorf("the run started before the suspension: %s %v, want succeeded", got.Status, deref(got.ErrorMessage))
	}
	if n := h.starts("before"); n != 1 {
		t.Errorf("the agent started %d times, want 1", n)
	}
}
