//go:build integration

package paperclip

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestSandboxLeaseReuse walks the lease-reuse road: an issue of a project
// whose execution workspace Paperclip keeps, on an environment with
// reuseLease, wakes its agent twice. The second run resumes the first run's
// lease — the same pod, its workspace and HOME as the first run left them —
// and the stock adapter hands the CLI the first run's session (--resume).
func TestSandboxLeaseReuse(t *testing.T) {
	srv := sharedServer(t)
	tr := readTranscript(t, "claude-obers-small-success.jsonl")
	// A warm runner lifecycle: Paperclip keeps the lease running after
	// the run (its provider resource disposition keep_running) instead of
	// releasing it.
	metrics := freeAddr(t)
	sw := newSandboxWorld(t, srv, sandboxOptions{
		EnvConfig:  map[string]any{"reuseLease": true, "runnerLifecycleMode": "warm"},
		DaemonArgs: []string{"--metrics-bind-address", metrics},
	})
	coder := sw.sandboxAgent(t, "Coder", "claude_local", tr, nil, nil)

	issueID := sw.reuseProject(t, coder.ID)

	run1 := sw.waitAgentRun(t, coder.ID, "", 2*time.Minute)
	got1 := srv.API.waitRun(t, run1.ID, 3*time.Minute)
	if got1.Status != "succeeded" {
		t.Fatalf("first run %s: status %s, error %q; want succeeded", run1.ID, got1.Status, str(got1.Error))
	}
	args1, _, _ := sw.pc.recorded(strings.ToLower(run1.ID))
	if containsArg(args1, "--resume") {
		t.Errorf("first run's CLI got --resume: %q", args1)
	}
	pods1, _ := sw.leasePods()

	// The project's workspace went into the pod and came back through
	// pcsync's native sync (one tar through the lease's stream each way),
	// not base64 chunks through executes.
	syncedIn := metricSum(t, metrics, `pcsync_sandbox_syncs_total{company="`+sw.pc.Slug+`",direction="in",outcome="completed"}`)
	syncedOut := metricSum(t, metrics, `pcsync_sandbox_syncs_total{company="`+sw.pc.Slug+`",direction="out",outcome="completed"}`)
	if syncedIn == 0 || syncedOut == 0 {
		t.Errorf("native sync mappings of the first run: %v in, %v out; want some each way", syncedIn, syncedOut)
	}
	if len(pods1) == 1 {
		got, err := os.ReadFile(filepath.Join(sw.hostDir, pods1[0], "workspace", "README.md"))
		if err != nil || string(got) != "# the project\n" {
			t.Errorf("the project's README.md in the lease's workspace: %q, %v", got, err)
		}
	}

	// Paperclip records the run's session for the issue just after the
	// run ends: wait for it, so the second wake is handed it.
	sw.waitTaskSession(t, coder.ID, tr.SessionID, time.Minute)

	wake := sw.wakeIssue(t, coder.ID, issueID, run1.ID, "e2e: reuse")
	got2 := srv.API.waitRun(t, wake.ID, 3*time.Minute)
	if got2.Status != "succeeded" || str(got2.SessionIDBefore) != tr.SessionID {
		t.Fatalf("second run %s: status %s, sessionIdBefore %q, error %q; want succeeded, %q", wake.ID, got2.Status, str(got2.SessionIDBefore), str(got2.Error), tr.SessionID)
	}
	// The second run ran in the first run's pod: its workspace path (the
	// lease's remoteCwd) names the pod, and no other pod was made.
	args2, _, _ := sw.pc.recorded(strings.ToLower(wake.ID))
	pods2, _ := sw.leasePods()
	slices.Sort(pods1)
	slices.Sort(pods2)
	if len(pods1) != 1 || !slices.Equal(pods1, pods2) {
		t.Fatalf("lease pods after the first run %v, after the second %v: want the second run in the first run's pod", pods1, pods2)
	}
	if !strings.Contains(strings.Join(args2, " "), "/"+pods1[0]+"/") {
		t.Errorf("second run's CLI args %q name no path of pod %s", args2, pods1[0])
	}
	// Paperclip handed the lease over: a new lease row of the same
	// provider lease (the pod).
	var leases []struct {
		ID              string `json:"id"`
		ProviderLeaseID string `json:"providerLeaseId"`
		HeartbeatRunID  string `json:"heartbeatRunId"`
		LeasePolicy     string `json:"leasePolicy"`
		Status          string `json:"status"`
	}
	srv.API.must(t, "GET", "/api/environments/"+sw.envID+"/leases", nil, &leases)
	byRun := map[string]string{}
	for _, l := range leases {
		if l.LeasePolicy != "reuse_by_environment" {
			t.Errorf("lease %s of run %s has policy %q, want reuse_by_environment", l.ID, l.HeartbeatRunID, l.LeasePolicy)
		}
		byRun[l.HeartbeatRunID] = l.ProviderLeaseID
	}
	if byRun[run1.ID] != pods1[0] || byRun[wake.ID] != pods1[0] {
		t.Errorf("Paperclip's leases %+v: want both runs on provider lease %s", leases, pods1[0])
	}

	// The session: Paperclip hands it to the second run, but the stock
	// adapter (2026.916.1) resumes a sandbox session only under the same
	// Paperclip lease id, and a handed-over lease gets a new one; it says
	// so in the run's log and starts a fresh session. docs/sandbox.md
	// ("Leases end") tells operators; this test fails when that changes.
	stdout2, _ := srv.API.runLog(t, wake.ID)
	if !strings.Contains(stdout2, `Claude session "`+tr.SessionID+`" does not match the current remote execution identity`) {
		t.Errorf("the second run's log does not give the adapter's reason for a fresh session:\n%s", truncate(stdout2, 3000))
	}
	if containsArg(args2, "--resume") {
		t.Errorf("the second run's CLI got --resume %q: Paperclip now resumes across runs; update docs/sandbox.md's Leases end and this test", args2)
	}
	t.Logf("one lease pod for both runs: %s", pods1[0])
}

// reuseProject makes a project whose execution workspace (a directory of
// this host that Paperclip syncs into the lease) Paperclip keeps on the
// world's environment, and an issue of it assigned to agentID; it returns
// the issue's id.
func (sw *sandboxWorld) reuseProject(t *testing.T, agentID string) string {
	t.Helper()
	srv := sw.srv
	ws := shortDir(t, "pcsws-")
	if err := os.WriteFile(filepath.Join(ws, "README.md"), []byte("# the project\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var project struct {
		ID string `json:"id"`
	}
	srv.API.must(t, "POST", "/api/companies/"+sw.company.ID+"/projects", map[string]any{
		"name":   "reuse",
		"status": "in_progress",
		"workspace": map[string]any{
			"name": "reuse", "sourceType": "non_git_path", "cwd": ws, "isPrimary": true,
		},
		"executionWorkspacePolicy": map[string]any{
			"enabled": true, "defaultMode": "shared_workspace", "environmentId": sw.envID,
		},
	}, &project)
	var issue struct {
		ID string `json:"id"`
	}
	srv.API.must(t, "POST", "/api/companies/"+sw.company.ID+"/issues", map[string]any{
		"title": "Reuse the lease", "description": "Resume the session.",
		"projectId": project.ID, "assigneeAgentId": agentID, "status": "todo",
	}, &issue)
	return issue.ID
}

// wakeIssue wakes agentID for issueID and returns the run that follows
// run not.
func (sw *sandboxWorld) wakeIssue(t *testing.T, agentID, issueID, not, reason string) heartbeatRun {
	t.Helper()
	var wake heartbeatRun
	sw.srv.API.must(t, "POST", "/api/agents/"+agentID+"/wakeup", map[string]any{
		"source": "on_demand", "triggerDetail": "manual", "reason": reason,
		"payload": map[string]any{"issueId": issueID},
	}, &wake)
	if wake.ID == "" {
		// Paperclip folded the wake into a run of the issue it had
		// queued itself: that run is the next.
		wake = sw.waitAgentRun(t, agentID, not, 2*time.Minute)
	}
	return wake
}

// waitAgentRun waits for a run of the agent other than not and returns it.
func (sw *sandboxWorld) waitAgentRun(t testing.TB, agentID, not string, within time.Duration) heartbeatRun {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		for _, r := range sw.srv.API.companyRuns(t, sw.company.ID) {
			if r.AgentID == agentID && r.ID != not {
				return r
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no run of agent %s within %s", agentID, within)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitTaskSession waits until Paperclip holds a task session of the agent
// whose session id is want.
func (sw *sandboxWorld) waitTaskSession(t testing.TB, agentID, want string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		var sessions []map[string]any
		sw.srv.API.must(t, "GET", "/api/agents/"+agentID+"/task-sessions", nil, &sessions)
		for _, s := range sessions {
			if strings.Contains(fmt.Sprint(s), want) {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no task session %s of agent %s within %s: %v", want, agentID, within, sessions)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
