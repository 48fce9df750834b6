//go:build integration

package paperclip

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/pcsync/pcsync/pkg/result"
)

// TestPaperclipRestartMidRun: Paperclip stops while pcsync runs an agent.
// The agent's process and its result survive in the spool; Paperclip does
// not lose the run silently, and the agent's next wake reports the lost run
// and resumes the session it created.
func TestPaperclipRestartMidRun(t *testing.T) {
	tl := getTools(t)
	srv := startServer(t, tl)
	srv.installAdapter(t)
	tr := readTranscript(t, "claude-obers-small-success.jsonl")
	w := newWorld(t, srv, worldOptions{Agents: []pcsyncAgent{{Name: "coder", Transcript: tr.Path, Sleep: 45}}})
	coder := w.agents["coder"]

	run := srv.API.wake(t, coder.ID, "e2e: restart mid-run")
	name := strings.ToLower(run.ID)
	pid := w.pc.standinPid(name)
	srv.Halt()
	if pidGone(pid) {
		t.Errorf("the agent's process %d died with Paperclip", pid)
	}
	res := w.pc.waitResult(name, 2*time.Minute)
	if res.Status != result.StatusSucceeded || str(res.SessionID) != tr.SessionID {
		t.Errorf("pcsync result of %s while Paperclip was down: %s, session %q; want succeeded, %s", name, res.Status, str(res.SessionID), tr.SessionID)
	}
	srv.restart(t)
	lost := srv.API.waitRunUntil(t, run.ID, 10*time.Minute, func(r heartbeatRun) bool {
		return r.Status != "queued" && r.Status != "running"
	})
	if lost.Status == "succeeded" {
		t.Errorf("Paperclip says the run in flight across its restart succeeded; the adapter cannot have reported it")
	}
	t.Logf("Paperclip's record of the run that was in flight across its restart: status %s, errorCode %q, error %q",
		lost.Status, str(lost.ErrorCode), str(lost.Error))

	// The next wake reports the lost run and resumes its session.
	run2 := srv.API.wake(t, coder.ID, "e2e: after the restart")
	got2 := srv.API.waitRun(t, run2.ID, 2*time.Minute)
	if got2.Status != "succeeded" {
		t.Errorf("run %s after the restart: %s (%q)", run2.ID, got2.Status, str(got2.Error))
	}
	if req2 := w.request(run2.ID); req2["sessionId"] != tr.SessionID {
		t.Errorf("the wake after the restart resumes session %v, want the lost run's %s", req2["sessionId"], tr.SessionID)
	}
	if rj, _ := json.Marshal(got2.ResultJSON); !strings.Contains(string(rj), name) {
		t.Errorf("the result of the run after the restart does not list the lost run %s: %s", name, truncate(string(rj), 2000))
	}
	stdout, _ := srv.API.runLog(t, run2.ID)
	if !strings.Contains(stdout, name) {
		t.Errorf("the run log after the restart does not report the lost run %s:\n%s", name, truncate(stdout, 3000))
	}
}
