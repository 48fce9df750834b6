//go:build integration

package paperclip

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pcsync/pcsync/internal/testing/testcluster"
)

// benchRun is one measured run.
type benchRun struct {
	wakeAt    time.Time // POST /wakeup sent
	startedAt time.Time // Paperclip's startedAt: its run started, the adapter's execute is called
	requestAt time.Time // the request file's modification time (execute wrote it)
	jobAt     time.Time // the Job first seen by a watch
	podDoneAt time.Time // the pod first seen Succeeded/Failed by a watch
	resultAt  time.Time // the result file's modification time
	endAt     time.Time // Paperclip's finishedAt: execute returned, the run is terminal
}

func pct(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(p*float64(len(s))+0.5) - 1
	return s[min(max(i, 0), len(s)-1)]
}

func msf(d time.Duration) string { return fmt.Sprintf("%d ms", d.Milliseconds()) }

// measure fills a run's times from Paperclip's record, the spool and the
// watches.
func (kw *kubeWorld) measure(b testing.TB, runID string, r *benchRun) {
	b.Helper()
	got := kw.srv.API.run(b, runID)
	if got.StartedAt != nil {
		r.startedAt = *got.StartedAt
	}
	if got.FinishedAt != nil {
		r.endAt = *got.FinishedAt
	}
	name := strings.ToLower(runID)
	if st, err := os.Stat(filepath.Join(kw.pc.Spool, name+".json")); err == nil {
		r.requestAt = st.ModTime()
	}
	if st, err := os.Stat(filepath.Join(kw.pc.Spool, name+".result.json")); err == nil {
		r.resultAt = st.ModTime()
	}
	job, _ := kw.jobOf(b, runID)
	kw.mu.Lock()
	r.jobAt, r.podDoneAt = kw.jobAt[job.Name], kw.podDone[job.Name]
	kw.mu.Unlock()
}

// pcsyncMutations counts the mutating requests pcsync's clients sent to
// the API server in namespace ns (the audit log records every request but
// get/list/watch).
func pcsyncMutations(b testing.TB, c *testcluster.Cluster, ns string) int {
	evs, err := c.AuditEvents(func(e testcluster.AuditEvent) bool {
		return e.ObjectRef != nil && e.ObjectRef.Namespace == ns && strings.Contains(strings.ToLower(e.UserAgent), "pcsync") &&
			(e.Stage == "" || e.Stage == "ResponseComplete")
	})
	if err != nil {
		b.Fatal(err)
	}
	return len(evs)
}

// logStreams counts pods/log GETs (only pcsync reads pod logs).
func logStreams(b testing.TB, c *testcluster.Cluster) float64 {
	rc, err := c.RequestCounts(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	var n float64
	for _, r := range rc {
		if r.Resource == "pods" && r.Subresource == "log" {
			n += r.Count
		}
	}
	return n
}

// BenchmarkPaperclipKubernetes drives the real Paperclip server, the
// adapter and `pcsync daemon --executor kubernetes` on the test control
// plane (kwok pods): 50 sequential wakes, a burst of 20, and cancels. It
// prints pcsync's figures beside those of the claude-k8s adapter measured
// the same way (issue 11). Figures, not assertions.
func BenchmarkPaperclipKubernetes(b *testing.B) {
	srv := sharedServer(b)
	tr := readTranscript(b, "claude-obers-small-success.jsonl")
	kw := newKubeWorld(b, srv, []pcsyncAgent{
		{Name: "coder", Transcript: tr.Path},
		// The sleeper's pods run until deleted (cancel).
		{Name: "sleeper", Transcript: tr.Path, Labels: testcluster.RunForever()},
	}, tr.Lines)
	for range b.N {
		benchKube(b, kw, tr)
	}
}

func benchKube(b *testing.B, kw *kubeWorld, tr transcript) {
	api := kw.srv.API
	coder := kw.agents["coder"]
	mut0 := pcsyncMutations(b, kw.c, kw.ns)
	logs0 := logStreams(b, kw.c)
	const seq = 50
	var runs []benchRun
	t0 := time.Now()
	for i := range seq {
		var r benchRun
		r.wakeAt = time.Now()
		run := api.wake(b, coder.ID, fmt.Sprintf("bench %d", i))
		if got := api.waitRun(b, run.ID, 3*time.Minute); got.Status != "succeeded" {
			b.Fatalf("run %s: %s (%q)", run.ID, got.Status, str(got.Error))
		}
		kw.measure(b, run.ID, &r)
		runs = append(runs, r)
	}
	seqWall := time.Since(t0)
	mutPerRun := float64(pcsyncMutations(b, kw.c, kw.ns)-mut0) / seq
	logsPerRun := (logStreams(b, kw.c) - logs0) / seq

	var wakeToJob, execToJob, reqToJob, podToEnd, podToResult []time.Duration
	for _, r := range runs {
		wakeToJob = append(wakeToJob, r.jobAt.Sub(r.wakeAt))
		execToJob = append(execToJob, r.jobAt.Sub(r.startedAt))
		reqToJob = append(reqToJob, r.jobAt.Sub(r.requestAt))
		podToEnd = append(podToEnd, r.endAt.Sub(r.podDoneAt))
		podToResult = append(podToResult, r.resultAt.Sub(r.podDoneAt))
	}

	// A burst of 20 wakes at once.
	const burst = 20
	bruns := make([]benchRun, burst)
	ids := make([]string, burst)
	var wg sync.WaitGroup
	for i := range burst {
		wg.Add(1)
		go func() {
			defer wg.Done()
			bruns[i].wakeAt = time.Now()
			ids[i] = wakeNoFatal(b, api, coder.ID, fmt.Sprintf("burst %d", i))
		}()
	}
	wg.Wait()
	if b.Failed() {
		b.FailNow()
	}
	var bWakeToJob, bReqToJob, bPodToEnd []time.Duration
	for i, id := range ids {
		if got := api.waitRun(b, id, 5*time.Minute); got.Status != "succeeded" {
			b.Fatalf("burst run %s: %s (%q)", id, got.Status, str(got.Error))
		}
		kw.measure(b, id, &bruns[i])
		bWakeToJob = append(bWakeToJob, bruns[i].jobAt.Sub(bruns[i].wakeAt))
		bReqToJob = append(bReqToJob, bruns[i].jobAt.Sub(bruns[i].requestAt))
		bPodToEnd = append(bPodToEnd, bruns[i].endAt.Sub(bruns[i].podDoneAt))
	}

	// Cancels: a run whose pod runs until deleted, cancelled in Paperclip.
	const cancels = 5
	var cancelToGone, cancelToPaperclip []time.Duration
	for i := range cancels {
		run := api.wake(b, kw.agents["sleeper"].ID, fmt.Sprintf("cancel %d", i))
		job, _ := kw.jobOf(b, run.ID)
		kw.waitPodRunning(b, job.Name)
		at := time.Now()
		api.cancel(b, run.ID)
		got := api.waitRun(b, run.ID, 2*time.Minute)
		if got.Status != "cancelled" {
			b.Fatalf("cancelled run %s: %s", run.ID, got.Status)
		}
		if got.FinishedAt != nil {
			cancelToPaperclip = append(cancelToPaperclip, got.FinishedAt.Sub(at))
		}
		gone := kw.waitJobGone(b, job.Name, 2*time.Minute)
		cancelToGone = append(cancelToGone, gone.Sub(at))
	}

	b.ReportMetric(float64(pct(execToJob, .5).Milliseconds()), "execute→Job-p50-ms")
	b.ReportMetric(float64(pct(podToEnd, .5).Milliseconds()), "pod-end→execute-returns-p50-ms")
	b.ReportMetric(float64(pct(cancelToGone, .5).Milliseconds()), "cancel→Job-gone-p50-ms")
	b.ReportMetric(mutPerRun+logsPerRun, "API-requests/run")
	rows := [][3]string{
		{"sequential wakes", fmt.Sprint(seq), fmt.Sprintf("in %s", seqWall.Round(time.Second))},
		{"wake → Job created p50", "437 ms", msf(pct(wakeToJob, .5))},
		{"execute start → Job created p50 (Paperclip startedAt → Job)", "≈ 70 ms (adapter part)", msf(pct(execToJob, .5))},
		{"request written → Job created p50 (pcsync alone)", "-", msf(pct(reqToJob, .5))},
		{"pod Succeeded → execute returns p50 (→ Paperclip finishedAt)", "1,653 ms", msf(pct(podToEnd, .5))},
		{"pod Succeeded → execute returns p99", "1,985 ms", msf(pct(podToEnd, .99))},
		{"pod Succeeded → result file p50", "-", msf(pct(podToResult, .5))},
		{"burst of 20: wake → Job p50", "5.7 s", msf(pct(bWakeToJob, .5))},
		{"burst of 20: request written → Job created p50 (pcsync alone)", "-", msf(pct(bReqToJob, .5))},
		{"burst of 20: pod Succeeded → execute returns p50", "-", msf(pct(bPodToEnd, .5))},
		{"cancel → Paperclip run cancelled p50", "< 1 s", msf(pct(cancelToPaperclip, .5))},
		{"cancel → Job gone p50", "6–14 s", msf(pct(cancelToGone, .5))},
		{"API requests per run (pcsync: mutating, from the audit log + log streams)", "7",
			fmt.Sprintf("%.1f (%.1f mutating + %.1f log streams)", mutPerRun+logsPerRun, mutPerRun, logsPerRun)},
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "\nPaperclip → pcsync (Kubernetes executor, kwok pods), beside the claude-k8s adapter:\n")
	fmt.Fprintf(&sb, "%-78s %-24s %s\n", "figure", "claude-k8s", "pcsync")
	for _, r := range rows {
		fmt.Fprintf(&sb, "%-78s %-24s %s\n", r[0], r[1], r[2])
	}
	fmt.Print(sb.String())
}

// waitPodRunning waits until the Job's pod runs.
func (kw *kubeWorld) waitPodRunning(b testing.TB, job string) {
	b.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		pods, err := kw.c.Client().CoreV1().Pods(kw.ns).List(context.Background(), metav1ListJob(job))
		if err == nil {
			for _, p := range pods.Items {
				if p.Status.Phase == "Running" {
					return
				}
			}
		}
		if time.Now().After(deadline) {
			b.Fatalf("the pod of Job %s never ran", job)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitJobGone waits until the watch saw the Job deleted and returns when.
func (kw *kubeWorld) waitJobGone(b testing.TB, job string, within time.Duration) time.Time {
	b.Helper()
	deadline := time.Now().Add(within)
	for {
		kw.mu.Lock()
		at, ok := kw.jobGone[job]
		kw.mu.Unlock()
		if ok {
			return at
		}
		if time.Now().After(deadline) {
			b.Fatalf("Job %s not deleted within %s", job, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// BenchmarkPaperclipLocal is BenchmarkPaperclipKubernetes with `pcsync
// daemon --executor local`: 50 sequential wakes and a burst of 20; execute
// start → the agent's process started, the process's end → execute returns.
func BenchmarkPaperclipLocal(b *testing.B) {
	srv := sharedServer(b)
	tr := readTranscript(b, "claude-obers-small-success.jsonl")
	w := newWorld(b, srv, worldOptions{Agents: []pcsyncAgent{{Name: "coder", Transcript: tr.Path}}})
	for range b.N {
		benchLocal(b, w)
	}
}

func benchLocal(b *testing.B, w *world) {
	api := w.srv.API
	coder := w.agents["coder"]
	measure := func(id string) (execToProc, reqToProc, endToReturn time.Duration) {
		got := api.run(b, id)
		name := strings.ToLower(id)
		res := w.pc.waitResult(name, time.Minute)
		rq, err1 := os.Stat(filepath.Join(w.pc.Spool, name+".json"))
		proc, err2 := os.Stat(filepath.Join(w.pc.Record, name+".args"))
		if err1 != nil || err2 != nil || got.StartedAt == nil || got.FinishedAt == nil || res.FinishedAt == nil {
			b.Fatalf("run %s: missing times (%v, %v, %+v)", id, err1, err2, got)
		}
		return proc.ModTime().Sub(*got.StartedAt), proc.ModTime().Sub(rq.ModTime()), got.FinishedAt.Sub(*res.FinishedAt)
	}
	const seq, burst = 50, 20
	var execToProc, reqToProc, endToReturn []time.Duration
	t0 := time.Now()
	for i := range seq {
		run := api.wake(b, coder.ID, fmt.Sprintf("bench %d", i))
		if got := api.waitRun(b, run.ID, 3*time.Minute); got.Status != "succeeded" {
			b.Fatalf("run %s: %s (%q)", run.ID, got.Status, str(got.Error))
		}
		a, r, e := measure(run.ID)
		execToProc, reqToProc, endToReturn = append(execToProc, a), append(reqToProc, r), append(endToReturn, e)
	}
	seqWall := time.Since(t0)
	ids := make([]string, burst)
	wakeAt := make([]time.Time, burst)
	var wg sync.WaitGroup
	for i := range burst {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wakeAt[i] = time.Now()
			ids[i] = wakeNoFatal(b, api, coder.ID, fmt.Sprintf("burst %d", i))
		}()
	}
	wg.Wait()
	if b.Failed() {
		b.FailNow()
	}
	var bWakeToProc, bEndToReturn []time.Duration
	for i, id := range ids {
		if got := api.waitRun(b, id, 5*time.Minute); got.Status != "succeeded" {
			b.Fatalf("burst run %s: %s (%q)", id, got.Status, str(got.Error))
		}
		_, _, e := measure(id)
		proc, _ := os.Stat(filepath.Join(w.pc.Record, strings.ToLower(id)+".args"))
		bWakeToProc = append(bWakeToProc, proc.ModTime().Sub(wakeAt[i]))
		bEndToReturn = append(bEndToReturn, e)
	}
	b.ReportMetric(float64(pct(execToProc, .5).Milliseconds()), "execute→process-p50-ms")
	b.ReportMetric(float64(pct(endToReturn, .5).Milliseconds()), "process-end→execute-returns-p50-ms")
	rows := [][2]string{
		{"sequential wakes", fmt.Sprintf("%d in %s", seq, seqWall.Round(time.Second))},
		{"execute start → process started p50 (Paperclip startedAt → CLI start)", msf(pct(execToProc, .5))},
		{"request written → process started p50 (pcsync alone)", msf(pct(reqToProc, .5))},
		{"process end → execute returns p50 (pcsync finishedAt → Paperclip finishedAt)", msf(pct(endToReturn, .5))},
		{"process end → execute returns p99", msf(pct(endToReturn, .99))},
		{"burst of 20: wake → process started p50", msf(pct(bWakeToProc, .5))},
		{"burst of 20: process end → execute returns p50", msf(pct(bEndToReturn, .5))},
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "\nPaperclip → pcsync (local executor):\n")
	for _, r := range rows {
		fmt.Fprintf(&sb, "%-80s %s\n", r[0], r[1])
	}
	fmt.Print(sb.String())
}

// wakeNoFatal is api.wake for other goroutines than the benchmark's: an
// error is reported with Error (FailNow must not be called there).
func wakeNoFatal(b testing.TB, a *api, agentID, reason string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var r heartbeatRun
	if err := a.do(ctx, "POST", "/api/agents/"+agentID+"/wakeup", map[string]any{
		"source": "on_demand", "triggerDetail": "manual", "reason": reason,
		"payload": map[string]any{}, "forceFreshSession": false,
	}, &r); err != nil {
		b.Error(err)
	}
	return r.ID
}
