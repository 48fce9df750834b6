package spool

import (
	"strings"
	"testing"

	"github.com/pcsync/pcsync/pkg/config"
	"github.com/pcsync/pcsync/pkg/result"
)

// TestShardAdoptsMovedCompanysRun: a run of acme goes on when acme moves to
// shard "b" and the daemon (which serves no shard) restarts: the next
// daemon adopts it and reports it once, and rejects a new run of acme,
// naming acme's shard.
func TestShardAdoptsMovedCompanysRun(t *testing.T) {
	h := newHarness(t, "")
	h.start()
	h.drop("before.yaml", request("slow", ""))
	h.started("before", 1)
	h.stop()

	h.model.Companies[0].Metadata.Labels = map[string]string{config.LabelShard: "b"}
	h.start()
	h.waitFor("adoption", func() bool { return h.sawEvent(EventAdopted, "before") })
	h.drop("after.yaml", request("coder", ""))
	if got := h.result("after"); got.Status != result.StatusRejected || !strings.Contains(deref(got.ErrorMessage).(string), `in shard "b"`) {
		t.Errorf("a new run of acme: %s %v, want rejected naming shard b", got.Status, deref(got.ErrorMessage))
	}
	h.releaseRun("before")
	if got := h.result("before"); got.Status != result.StatusSucceeded {
		t.Errorf("the run started before the move: %s %v, want succeeded", got.Status, deref(got.ErrorMessage))
	}
	if n := h.starts("before"); n != 1 {
		t.Errorf("the agent started %d times, want 1", n)
	}
}
