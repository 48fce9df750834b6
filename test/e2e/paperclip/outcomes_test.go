//go:build integration

package paperclip

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pcsync/pcsync/pkg/result"
)

// TestAuthFailureShowsInPaperclip: a transcript in which Claude Code fails
// to authenticate ends as a failed run with errorCode auth_required and a
// message that says what happened.
func TestAuthFailureShowsInPaperclip(t *testing.T) {
	srv := sharedServer(t)
	tr := readTranscript(t, "claude-oauth-expired-auth.jsonl")
	w := newWorld(t, srv, worldOptions{Agents: []pcsyncAgent{{Name: "locked", Transcript: tr.Path}}})
	run := srv.API.wake(t, w.agents["locked"].ID, "e2e: auth failure")
	got := srv.API.waitRun(t, run.ID, 2*time.Minute)
	if got.Status != "failed" || str(got.ErrorCode) != "auth_required" {
		t.Errorf("run %s: status %s, errorCode %q; want failed, auth_required (error %q)", run.ID, got.Status, str(got.ErrorCode), str(got.Error))
	}
	if msg := str(got.Error); !strings.Contains(strings.ToLower(msg), "authenticat") {
		t.Errorf("run %s error %q does not explain the authentication failure", run.ID, msg)
	}
}

// pidGone tells whether no process has pid (or it is a zombie).
func pidGone(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil {
		return true
	}
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	f := strings.Fields(string(data))
	return len(f) > 2 && f[2] == "Z"
}

// waitPidGone waits until pid is gone.
func waitPidGone(t testing.TB, pid int, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !pidGone(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("process %d still runs after %s", pid, within)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (e *pcsyncEnv) standinPid(runID string) int {
	e.t.Helper()
	path := filepath.Join(e.Record, runID+".pid")
	waitFile(e.t, path, 2*time.Minute)
	data, err := os.ReadFile(path)
	if err != nil {
		e.t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		e.t.Fatalf("%s: %v", path, err)
	}
	return pid
}

// TestCancelFromPaperclip: cancelling a running run in Paperclip cancels it
// in pcsync; the agent's process is gone and both sides say cancelled.
func TestCancelFromPaperclip(t *testing.T) {
	srv := sharedServer(t)
	tr := readTranscript(t, "claude-obers-small-success.jsonl")
	w := newWorld(t, srv, worldOptions{Agents: []pcsyncAgent{{Name: "sleeper", Transcript: tr.Path, Sleep: 600}}})
	run := srv.API.wake(t, w.agents["sleeper"].ID, "e2e: cancel")
	name := strings.ToLower(run.ID)
	pid := w.pc.standinPid(name)
	srv.API.cancel(t, run.ID)
	got := srv.API.waitRun(t, run.ID, time.Minute)
	if got.Status != "cancelled" {
		t.Errorf("run %s: status %s, want cancelled (error %q)", run.ID, got.Status, str(got.Error))
	}
	res := w.pc.waitResult(name, time.Minute)
	if res.Status != result.StatusCancelled {
		t.Errorf("pcsync result of %s: %s, want cancelled", name, res.Status)
	}
	waitPidGone(t, pid, 30*time.Second)
}

// TestTimeoutFromPcsync: a run past its timeoutSec (the Paperclip agent's
// adapterConfig) ends timed_out in Paperclip.
func TestTimeoutFromPcsync(t *testing.T) {
	srv := sharedServer(t)
	tr := readTranscript(t, "claude-obers-small-success.jsonl")
	w := newWorld(t, srv, worldOptions{Agents: []pcsyncAgent{{Name: "slow", Transcript: tr.Path, Sleep: 600, TimeoutSec: 3}}})
	run := srv.API.wake(t, w.agents["slow"].ID, "e2e: timeout")
	name := strings.ToLower(run.ID)
	pid := w.pc.standinPid(name)
	got := srv.API.waitRun(t, run.ID, 2*time.Minute)
	if got.Status != "timed_out" {
		t.Errorf("run %s: status %s, want timed_out (errorCode %q, error %q)", run.ID, got.Status, str(got.ErrorCode), str(got.Error))
	}
	if res := w.pc.waitResult(name, time.Minute); res.Status != result.StatusTimedOut {
		t.Errorf("pcsync result of %s: %s, want timed_out", name, res.Status)
	}
	waitPidGone(t, pid, 30*time.Second)
}

// TestIssueAssignmentWakesAgent: an issue assigned to the agent in
// Paperclip wakes it through pcsync, with the task in its context: the
// request's context, the agent's PAPERCLIP_* environment and its prompt.
func TestIssueAssignmentWakesAgent(t *testing.T) {
	srv := sharedServer(t)
	tr := readTranscript(t, "claude-obers-small-success.jsonl")
	w := newWorld(t, srv, worldOptions{Agents: []pcsyncAgent{{Name: "coder", Transcript: tr.Path}}})
	coder := w.agents["coder"]
	title := "Fix the flaky login test " + strconv.FormatInt(time.Now().UnixNano()%1e6, 10)
	var issue struct {
		ID         string `json:"id"`
		Identifier string `json:"identifier"`
	}
	srv.API.must(t, "POST", "/api/companies/"+w.company.ID+"/issues", map[string]any{
		"title": title, "description": "The login test fails one run in ten.",
		"assigneeAgentId": coder.ID, "status": "todo",
	}, &issue)
	var run heartbeatRun
	deadline := time.Now().Add(2 * time.Minute)
	for run.ID == "" {
		for _, r := range srv.API.companyRuns(t, w.company.ID) {
			if r.AgentID == coder.ID {
				run = r
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("assigning issue %s woke no run of agent %s", issue.ID, coder.ID)
		}
		time.Sleep(100 * time.Millisecond)
	}
	got := srv.API.waitRun(t, run.ID, 2*time.Minute)
	if got.Status != "succeeded" {
		t.Errorf("run %s: status %s (error %q), want succeeded", run.ID, got.Status, str(got.Error))
	}
	req := w.request(run.ID)
	ctx, _ := req["context"].(map[string]any)
	if ctx["issueId"] != issue.ID {
		t.Errorf("request context %v, want issueId %s", ctx, issue.ID)
	}
	_, env, prompt := w.pc.recorded(strings.ToLower(run.ID))
	if env["PAPERCLIP_ISSUE_ID"] != issue.ID {
		t.Errorf("agent env PAPERCLIP_ISSUE_ID = %q, want %s", env["PAPERCLIP_ISSUE_ID"], issue.ID)
	}
	if !strings.Contains(prompt, title) {
		t.Errorf("the agent's prompt does not name the issue %q:\n%s", title, truncate(prompt, 2000))
	}
	if env["PAPERCLIP_API_KEY"] == "" || env["PAPERCLIP_API_URL"] != srv.URL {
		t.Errorf("agent env PAPERCLIP_API_URL = %q (want %s), PAPERCLIP_API_KEY set: %v", env["PAPERCLIP_API_URL"], srv.URL, env["PAPERCLIP_API_KEY"] != "")
	}
}
