//go:build integration

package paperclip

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pcsync/pcsync/internal/testing/testcluster"
	"github.com/pcsync/pcsync/pkg/result"
)

// TestPaperclipRestartMidRun: Paperclip stops while pcsync runs an agent.
// The agent's process and its result survive in the spool; Paperclip does
// not lose the run silently: the agent's next wake reports the lost run,
// resumes the session it created and books its spend in Paperclip (as the
// lost run's own), and the wake after that does not book it again.
func TestPaperclipRestartMidRun(t *testing.T) {
	tl := getTools(t)
	srv := startServer(t, tl)
	srv.installAdapter(t)
	tr := readTranscript(t, "claude-obers-small-success.jsonl")
	w := newWorld(t, srv, worldOptions{
		Agents:        []pcsyncAgent{{Name: "coder", Transcript: tr.Path, Sleep: 45}},
		AdapterConfig: map[string]any{"billingType": "api"},
	})
	coder := w.agents["coder"]
	c := cents(tr.CostUSD)

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
	if s := srv.API.costs(t, w.company.ID); s["spendCents"] != float64(0) {
		t.Errorf("Paperclip booked %v cents for the lost run by itself; the adapter would book it twice", s["spendCents"])
	}

	// The next wake reports the lost run, resumes its session and books it.
	run2 := srv.API.wake(t, coder.ID, "e2e: after the restart")
	got2 := srv.API.waitRun(t, run2.ID, 2*time.Minute)
	if got2.Status != "succeeded" {
		t.Errorf("run %s after the restart: %s (%q)", run2.ID, got2.Status, str(got2.Error))
	}
	checkLostReported(t, w, run2.ID, got2, name, tr.SessionID)
	waitSpend(t, srv, w.company.ID, 2*c)
	checkAgentCosts(t, srv, w.company.ID, map[string]agentCosts{coder.ID: {AgentID: coder.ID, CostCents: float64(2 * c), APIRunCount: 2}})

	// A second wake has nothing left to book.
	run3 := srv.API.wake(t, coder.ID, "e2e: the wake after")
	if got3 := srv.API.waitRun(t, run3.ID, 2*time.Minute); got3.Status != "succeeded" {
		t.Errorf("run %s: %s (%q)", run3.ID, got3.Status, str(got3.Error))
	}
	if stdout, _ := srv.API.runLog(t, run3.ID); strings.Contains(stdout, name) {
		t.Errorf("the second wake after the restart reports the lost run %s again:\n%s", name, truncate(stdout, 3000))
	}
	waitSpend(t, srv, w.company.ID, 3*c)
	checkAgentCosts(t, srv, w.company.ID, map[string]agentCosts{coder.ID: {AgentID: coder.ID, CostCents: float64(3 * c), APIRunCount: 3}})
}

// checkLostReported checks the wake after a lost run: its request resumes
// the lost run's session, and its log and resultJson report the lost run
// and the booking of its spend.
func checkLostReported(t testing.TB, w *world, runID string, got heartbeatRun, lostName, session string) {
	t.Helper()
	if req := w.request(runID); req["sessionId"] != session {
		t.Errorf("the wake %s after the lost run %s resumes session %v, want the lost run's %s", runID, lostName, req["sessionId"], session)
	}
	rj, _ := json.Marshal(got.ResultJSON)
	if !strings.Contains(string(rj), lostName) {
		t.Errorf("the result of run %s does not list the lost run %s: %s", runID, lostName, truncate(string(rj), 2000))
	}
	stdout, _ := w.srv.API.runLog(t, runID)
	if !strings.Contains(stdout, "run "+lostName+" of this agent finished in pcsync while Paperclip was not waiting") {
		t.Errorf("the log of run %s does not report the lost run %s:\n%s", runID, lostName, truncate(stdout, 3000))
	}
	if !strings.Contains(stdout, "booked the spend of run "+lostName+" in Paperclip") {
		t.Errorf("the log of run %s does not say the lost run %s's spend was booked:\n%s", runID, lostName, truncate(stdout, 3000))
	}
}

// checkAgentCosts compares Paperclip's costs by agent (cents and the
// number of distinct runs booked) with want.
func checkAgentCosts(t testing.TB, srv *server, cid string, want map[string]agentCosts) {
	t.Helper()
	if diff := cmp.Diff(want, srv.API.costsByAgent(t, cid)); diff != "" {
		t.Errorf("Paperclip's costs by agent (-want +got):\n%s", diff)
	}
}

// TestPaperclipPodReplaced: the pod of Paperclip and its pcsync sidecar is
// replaced while three runs are in flight as Jobs. Both containers stop
// together (SIGTERM, as on a pod deletion) and start again on the same
// spool and state directory, the daemon first, Paperclip once one run has
// ended meanwhile. Every run keeps its one Job (the new daemon adopts the
// ones still running) and gets one result; each agent's next wake reports
// its lost run, resumes its session and books its spend once.
func TestPaperclipPodReplaced(t *testing.T) {
	tl := getTools(t)
	srv := startServer(t, tl)
	srv.installAdapter(t)
	tr := readTranscript(t, "claude-obers-small-success.jsonl")
	// How long each run's pod runs: "early" ends while Paperclip is down,
	// the others once it is back.
	delays := map[string]time.Duration{"early": 12 * time.Second, "mid": 20 * time.Second, "late": 28 * time.Second}
	var agents []pcsyncAgent
	for name, d := range delays {
		agents = append(agents, pcsyncAgent{Name: name, Transcript: tr.Path,
			Labels: testcluster.Merge(testcluster.SucceedAfter(d), map[string]string{"e2e": "paperclip"})})
	}
	kw := newKubeWorldWith(t, srv, agents, tr.Lines, map[string]any{"billingType": "api"})
	c := cents(tr.CostUSD)
	cs := kw.c.Client()

	runs := map[string]string{} // pcsync agent → spool name of its run
	for name := range delays {
		runs[name] = strings.ToLower(srv.API.wake(t, kw.agents[name].ID, "e2e: pod replaced").ID)
	}
	for _, n := range runs {
		kw.jobOf(t, n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	jobsOf := func(n string) []string {
		t.Helper()
		l, err := cs.BatchV1().Jobs(kw.ns).List(ctx, metav1.ListOptions{LabelSelector: "paperclip.io/run-id=" + n})
		if err != nil {
			t.Fatalf("list the Jobs of run %s: %v", n, err)
		}
		var names []string
		for _, j := range l.Items {
			names = append(names, j.Name)
		}
		return names
	}
	before := map[string][]string{}
	for _, n := range runs {
		before[n] = jobsOf(n)
		if len(before[n]) != 1 {
			t.Fatalf("run %s has Jobs %v before the pod goes, want one", n, before[n])
		}
	}

	// The pod goes: both containers get SIGTERM at once.
	down := time.Now()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		srv.Halt()
	}()
	kw.daemon.stop(t)
	wg.Wait()
	t.Logf("Paperclip and the daemon stopped in %s", time.Since(down).Round(time.Millisecond))

	// The new pod, on the same volume: the daemon adopts the Jobs and
	// writes the result of the run that ends while Paperclip is still down.
	d2 := kw.pc.startDaemon("kubernetes", nil, "--kubeconfig", kw.c.KubeconfigPath(), "--applyset-namespace", kw.setNS)
	early := kw.pc.waitResult(runs["early"], 2*time.Minute)
	if early.Status != result.StatusSucceeded || str(early.SessionID) != tr.SessionID {
		t.Errorf("the result written while Paperclip was down: %s, session %q; want succeeded, %s", early.Status, str(early.SessionID), tr.SessionID)
	}
	srv.restart(t)
	t.Logf("the pod's replacement took %s (Paperclip answering again)", time.Since(down).Round(time.Millisecond))

	for name, n := range runs {
		res := kw.pc.waitResult(n, 2*time.Minute)
		if res.Status != result.StatusSucceeded {
			t.Errorf("run %s (%s): %s (%s)", n, name, res.Status, str(res.ErrorMessage))
		}
		if res.Job == nil || !cmp.Equal([]string{res.Job.Name}, before[n]) {
			t.Errorf("the result of run %s names Job %+v, want %v", n, res.Job, before[n])
		}
		files, _ := filepath.Glob(filepath.Join(kw.pc.Spool, "*"+n+"*.result.json"))
		if len(files) != 1 {
			t.Errorf("run %s has result files %v, want one", n, files)
		}
		if now := jobsOf(n); len(now) > 1 {
			t.Errorf("run %s has Jobs %v after the pod's replacement, want one", n, now)
		}
		if name != "early" && !hasLine(d2.out.String(), "run adopted from an earlier daemon", n) {
			t.Errorf("the new daemon's log does not say it adopted run %s:\n%s", n, tail(d2.out.String(), 4000))
		}
	}
	// No second Job was ever created (the watch saw every Job of the namespace).
	kw.mu.Lock()
	perRun := map[string]int{}
	for _, j := range kw.jobs {
		perRun[j.Labels["paperclip.io/run-id"]]++
	}
	kw.mu.Unlock()
	for _, n := range runs {
		if perRun[n] != 1 {
			t.Errorf("run %s had %d Jobs in all, want 1", n, perRun[n])
		}
	}

	// Paperclip lost the runs; each agent's next wake reports its run,
	// resumes its session and books its spend.
	for _, n := range runs {
		srv.API.waitRunUntil(t, n, 5*time.Minute, func(r heartbeatRun) bool { return r.Status != "queued" && r.Status != "running" })
	}
	t.Logf("every run ended in pcsync and in Paperclip %s after the pod went", time.Since(down).Round(time.Millisecond))
	if s := srv.API.costs(t, kw.company.ID); s["spendCents"] != float64(0) {
		t.Errorf("Paperclip booked %v cents for the lost runs by itself", s["spendCents"])
	}
	next := map[string]string{}
	for name := range runs {
		next[name] = srv.API.wake(t, kw.agents[name].ID, "e2e: after the pod's replacement").ID
	}
	want := map[string]agentCosts{}
	for name, id := range next {
		got := srv.API.waitRun(t, id, 3*time.Minute)
		if got.Status != "succeeded" {
			t.Errorf("run %s (%s) after the replacement: %s (%q)", id, name, got.Status, str(got.Error))
		}
		checkLostReported(t, kw.world, id, got, runs[name], tr.SessionID)
		a := kw.agents[name].ID
		want[a] = agentCosts{AgentID: a, CostCents: float64(2 * c), APIRunCount: 2}
	}
	waitSpend(t, srv, kw.company.ID, int64(2*len(runs))*c)
	checkAgentCosts(t, srv, kw.company.ID, want)
	t.Logf("the next wakes reported and booked the lost runs %s after the pod went", time.Since(down).Round(time.Millisecond))
}

// hasLine says whether some line of text holds every one of parts.
func hasLine(text string, parts ...string) bool {
	for line := range strings.SplitSeq(text, "\n") {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			return true
		}
	}
	return false
}
