package spool

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestListShowsQueuedRunningAndFinished(t *testing.T) {
	h := newHarness(t, `
  - name: coder
    adapter: claude_local
    env: {AGENT_MODE: ok}
  - name: single
    adapter: claude_local
    env: {AGENT_MODE: block}
`)
	h.start()
	h.drop("done.yaml", request("coder", ""))
	h.result("done")
	h.drop("busy.yaml", request("single", "runId: busy-run\n"))
	h.started("busy-run", 1)
	h.drop("waiting.yaml", request("single", ""))
	statuses := func() map[string]string {
		l, err := ListRuns(h.spool, h.state)
		if err != nil {
			t.Fatal(err)
		}
		if !l.DaemonRunning {
			t.Error("the listing does not see the running daemon")
		}
		out := map[string]string{}
		for _, r := range l.Runs {
			out[r.Name+"/"+r.RunID] = r.Status
		}
		return out
	}
	want := map[string]string{"done/done": "succeeded", "busy/busy-run": "running", "waiting/waiting": "queued"}
	h.waitFor("the listing to show every state", func() bool { return cmp.Equal(want, statuses()) })

	info, err := ShowRun(h.spool, h.state, "busy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if info.Status != "running" || info.PID == 0 || info.StartedAt == nil || info.Company != "acme" || info.Agent != "single" {
		t.Errorf("show busy: %+v", info)
	}
	h.releaseRun("busy-run")
	h.releaseRun("waiting")
	h.result("waiting")
	h.stop()
	l, err := ListRuns(h.spool, h.state)
	if err != nil {
		t.Fatal(err)
	}
	if l.DaemonRunning {
		t.Error("the listing sees a daemon after it stopped")
	}
	for _, r := range l.Runs {
		if r.Status != "succeeded" || r.Result == nil {
			t.Errorf("%s: %s after the daemon finished", r.Name, r.Status)
		}
	}
	if _, err := ShowRun(h.spool, h.state, "nope"); err == nil {
		t.Error("show of a missing request did not fail")
	}
}
