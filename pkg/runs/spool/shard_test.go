package spool

import (
	"strings"
	"testing"

	"github.com/pcsync/pcsync/pkg/config"
	"github.com/pcsync/pcsync/pkg/result"
)

// TestRunGoesOnNewOneRejected: a run of acme goes on when acme moves to
// shard "b", or is suspended (spec.suspend), and the daemon (which serves
// no shard) restarts: the next daemon adopts it and reports it once, and
// rejects a new run of acme, saying why (acme's shard; company_suspended).
func TestRunGoesOnNewOneRejected(t *testing.T) {
	tests := []struct {
		name   string
		change func(c *config.Company)
		code   result.ErrorCode
		says   string
	}{
		{"moved to another shard", func(c *config.Company) { c.Metadata.Labels = map[string]string{config.LabelShard: "b"} },
			result.ErrInvalidRequest, `in shard "b"`},
		{"suspended", func(c *config.Company) { c.Spec.Suspend = true },
			result.ErrCompanySuspended, `company "acme" is suspended`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, "")
			h.start()
			h.drop("before.yaml", request("slow", ""))
			h.started("before", 1)
			h.stop()

			tc.change(&h.model.Companies[0])
			h.start()
			h.waitFor("adoption", func() bool { return h.sawEvent(EventAdopted, "before") })
			h.drop("after.yaml", request("coder", ""))
			got := h.result("after")
			if got.Status != result.StatusRejected || got.ErrorCode == nil || *got.ErrorCode != tc.code ||
				!strings.Contains(deref(got.ErrorMessage).(string), tc.says) {
				t.Errorf("a new run of acme: %s %v %v, want rejected, %s, saying %s", got.Status, deref(got.ErrorCode),
					deref(got.ErrorMessage), tc.code, tc.says)
			}
			h.releaseRun("before")
			if got := h.result("before"); got.Status != result.StatusSucceeded {
				t.Errorf("the run started before: %s %v, want succeeded", got.Status, deref(got.ErrorMessage))
			}
			if n := h.starts("before"); n != 1 {
				t.Errorf("the agent started %d times, want 1", n)
			}
		})
	}
}
