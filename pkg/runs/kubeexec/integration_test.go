//go:build integration

package kubeexec

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/pcsync/pcsync/internal/lib/agentpod"
	"github.com/pcsync/pcsync/internal/testing/testcluster"
	"github.com/pcsync/pcsync/pkg/adapters"
	"github.com/pcsync/pcsync/pkg/result"
)

// outcomeFields are the result fields a run gets from its log.
type outcomeFields struct {
	SessionID  *string
	Summary    *string
	Model      *string
	Usage      *result.Usage
	UsageBasis *result.UsageBasis
	CostUSD    *float64
	NumTurns   *int
}

// expectedFromTranscript runs the adapter's parser over a transcript, as the
// local executor would: the result's fields must be the same.
func expectedFromTranscript(t *testing.T, file string) outcomeFields {
	t.Helper()
	ad, err := adapters.Get(adapters.ClaudeLocal)
	if err != nil {
		t.Fatal(err)
	}
	p := ad.NewParser(adapters.ParserOptions{Model: "claude-sonnet-4-6"})
	f, err := os.Open(filepath.Join("testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := adapters.FeedLines(p, f); err != nil {
		t.Fatal(err)
	}
	o := p.Finish(adapters.ProcessOutcome{ExitCode: result.Ptr(0)})
	if o.Failed || o.SessionID == nil || o.Usage == nil {
		t.Fatalf("the transcript does not parse as a successful run: %+v", o)
	}
	return outcomeFields{o.SessionID, o.Summary, o.Model, o.Usage, o.UsageBasis, o.CostUSD, o.NumTurns}
}

func fieldsOf(r result.RunResult) outcomeFields {
	return outcomeFields{r.SessionID, r.Summary, r.Model, r.Usage, r.UsageBasis, r.CostUSD, r.NumTurns}
}

const claudeTranscript = "claude-obers-small-success.jsonl"

// TestRunSucceedsWithClaudeTranscript: the pod's log is a real Claude Code
// stream-json transcript; the result's session, usage, cost and summary come
// from it, the log file is the transcript byte for byte, the API key reached
// only the Secret, and once the result is written the Secret is deleted and
// the finished Job kept for its ttlSecondsAfterFinished (a late create of it
// is refused: see TestDaemonKilledDuringJobCreate).
func TestRunSucceedsWithClaudeTranscript(t *testing.T) {
	t.Parallel()
	lines := transcript(t, claudeTranscript)
	e := newEnv(t, envOptions{Labels: testcluster.SucceedAfter(time.Second), LogLines: lines})
	e.drop("ok-1", map[string]any{"context": map[string]any{"taskId": "T-1"}})
	d := e.startDaemon(true, nil)
	d.wait(t)

	res := e.result("ok-1")
	if res.Status != result.StatusSucceeded || res.ErrorCode != nil || res.ExitCode == nil || *res.ExitCode != 0 {
		t.Fatalf("result: status %s, errorCode %v, errorMessage %v, exitCode %v; want succeeded, exit 0",
			res.Status, deref(res.ErrorCode), deref(res.ErrorMessage), deref(res.ExitCode))
	}
	if diff := cmp.Diff(expectedFromTranscript(t, claudeTranscript), fieldsOf(res)); diff != "" {
		t.Errorf("result fields from the log (-want +got):\n%s", diff)
	}
	job := e.jobName("ok-1")
	if res.Job == nil || res.Job.Namespace != e.ns || res.Job.Name != job || !strings.HasPrefix(res.Job.Pod, job+"-") {
		t.Errorf("result job = %+v, want namespace %s, name %s and its pod", res.Job, e.ns, job)
	}
	if res.StartedAt == nil || res.FinishedAt == nil || res.DurationMs == nil || *res.DurationMs < 0 {
		t.Errorf("result times: startedAt %v finishedAt %v durationMs %v", res.StartedAt, res.FinishedAt, res.DurationMs)
	}
	if diff := cmp.Diff(strings.Join(lines, "\n")+"\n", e.logFile("ok-1")); diff != "" {
		t.Errorf("ok-1.log differs from the transcript (-want +got):\n%s", diff)
	}
	data, _ := os.ReadFile(filepath.Join(e.spool, "ok-1.result.json"))
	if strings.Contains(string(data), testAPIKey) {
		t.Error("the API key appears in the result")
	}
	if _, err := e.cs.CoreV1().Secrets(e.ns).Get(context.Background(), job, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the run's Secret after its result was written: %v, want NotFound (deleted by pcsync)", err)
	}
	if e.jobGone(job) {
		t.Errorf("Job %s is deleted after its result was written; want it kept until its ttlSecondsAfterFinished", job)
	} else if j, err := e.cs.BatchV1().Jobs(e.ns).Get(context.Background(), job, metav1.GetOptions{}); err != nil || j.Spec.TTLSecondsAfterFinished == nil || *j.Spec.TTLSecondsAfterFinished <= 0 {
		t.Errorf("the kept Job %s: %v; want it with a ttlSecondsAfterFinished", job, err)
	}
	if n := e.auditCount("create", "jobs", job); n != 1 {
		t.Errorf("%d Job creations, want 1", n)
	}
}

// TestRerunWhileTheFinishedJobIsKept: deleting a run's result makes its
// request pending again, which runs it once more, also while its finished
// Job is kept for its ttlSecondsAfterFinished: the next daemon (adoption
// finds the kept Job) and a running daemon (its create is answered
// AlreadyExists) replace the kept Job with a new one.
func TestRerunWhileTheFinishedJobIsKept(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t, envOptions{Labels: testcluster.SucceedAfter(time.Second), LogLines: transcript(t, claudeTranscript)})
	job := e.jobName("again-1")
	resultPath := filepath.Join(e.spool, "again-1"+result.Suffix)
	kept := func(what string) string {
		t.Helper()
		res := e.result("again-1")
		if res.Status != result.StatusSucceeded {
			t.Fatalf("%s: %s %s %q; want succeeded", what, res.Status, deref(res.ErrorCode), deref(res.ErrorMessage))
		}
		j, err := e.cs.BatchV1().Jobs(e.ns).Get(ctx, job, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("%s: the kept Job: %v", what, err)
		}
		return string(j.UID)
	}
	once := func() {
		d := e.startDaemon(true, nil)
		d.wait(t)
		d.stop(t)
	}
	e.drop("again-1", nil)
	once()
	first := kept("the first run")

	if err := os.Remove(resultPath); err != nil {
		t.Fatal(err)
	}
	once()
	second := kept("the run again, by the next daemon")

	d := e.startDaemon(false, nil)
	if err := os.Remove(resultPath); err != nil {
		t.Fatal(err)
	}
	e.waitUntil("the third run's result", func() bool {
		_, err := os.Stat(resultPath)
		return err == nil
	})
	d.stop(t)
	third := kept("the run again, by a running daemon")

	if first == second || second == third {
		t.Errorf("the kept Jobs' UIDs %s, %s, %s: want a new Job for each run", first, second, third)
	}
	if n := e.auditCount("create", "pods", ""); n != 3 {
		t.Errorf("%d pods created, want 3 (three runs)", n)
	}
}

// TestOOMKilled: the container ends OOMKilled with 137; the result says so,
// with the signal and the memory limit.
func TestOOMKilled(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{Labels: testcluster.OOMKilled(300 * time.Millisecond), LogLines: transcript(t, claudeTranscript)[:1]})
	e.drop("oom-1", nil)
	e.startDaemon(true, nil).wait(t)
	res := e.result("oom-1")
	want := struct {
		Status   result.Status
		Code     result.ErrorCode
		ExitCode int
		Signal   string
	}{result.StatusFailed, result.ErrOOMKilled, 137, "SIGKILL"}
	got := want
	got.Status, got.Code, got.ExitCode, got.Signal = res.Status, deref(res.ErrorCode), deref(res.ExitCode), deref(res.Signal)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("result (-want +got):\n%s", diff)
	}
	msg := deref(res.ErrorMessage)
	for _, s := range []string{"OOMKilled", "137", "SIGKILL", "4Gi", "resources.limits.memory"} {
		if !strings.Contains(msg, s) {
			t.Errorf("errorMessage %q does not mention %q", msg, s)
		}
	}
	// The session started before the kill is still reported.
	if res.SessionID == nil {
		t.Error("sessionId is null although the log's init event named it")
	}
}

// TestImagePullFailure: a pod waiting in ErrImagePull fails the run at once
// (not at the deadline) and the Job is deleted.
func TestImagePullFailure(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{Labels: testcluster.ImagePullFailure("ErrImagePull")})
	e.drop("pull-1", nil)
	e.startDaemon(true, nil).wait(t)
	res := e.result("pull-1")
	if res.Status != result.StatusFailed || deref(res.ErrorCode) != result.ErrImagePullFailed {
		t.Fatalf("result: %s %s %q; want failed image_pull_failed", res.Status, deref(res.ErrorCode), deref(res.ErrorMessage))
	}
	if msg := deref(res.ErrorMessage); !strings.Contains(msg, "ErrImagePull") || !strings.Contains(msg, "pcsync-agent-claude:dev") {
		t.Errorf("errorMessage %q does not name the reason and the image", msg)
	}
	if !e.jobGone(e.jobName("pull-1")) {
		t.Error("the Job of the failed run still exists")
	}
}

// TestUnschedulable: a pod the scheduler cannot place fails the run after
// the grace period, with the scheduler's message.
func TestUnschedulable(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{Labels: testcluster.Unschedulable()})
	e.drop("nosched-1", nil)
	e.startDaemon(true, nil).wait(t)
	res := e.result("nosched-1")
	if res.Status != result.StatusFailed || deref(res.ErrorCode) != result.ErrUnschedulable {
		t.Fatalf("result: %s %s %q; want failed unschedulable", res.Status, deref(res.ErrorCode), deref(res.ErrorMessage))
	}
	if msg := deref(res.ErrorMessage); !strings.Contains(msg, "nodes are available") {
		t.Errorf("errorMessage %q does not carry the scheduler's message", msg)
	}
}

// TestDeadlineExceeded: the Job's activeDeadlineSeconds (the request's
// timeoutSec) stops a run that does not end.
func TestDeadlineExceeded(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{Labels: testcluster.RunForever(), LogLines: transcript(t, claudeTranscript)[:2]})
	e.drop("slow-1", map[string]any{"timeoutSec": 2})
	e.startDaemon(true, nil).wait(t)
	res := e.result("slow-1")
	if res.Status != result.StatusTimedOut || deref(res.ErrorCode) != result.ErrTimeout || !res.TimedOut {
		t.Fatalf("result: %s %s timedOut=%v %q; want timed_out timeout", res.Status, deref(res.ErrorCode), res.TimedOut, deref(res.ErrorMessage))
	}
	if msg := deref(res.ErrorMessage); !strings.Contains(msg, "activeDeadlineSeconds") || !strings.Contains(msg, "timeoutSec") {
		t.Errorf("errorMessage %q does not explain the deadline", msg)
	}
	if res.SessionID == nil {
		t.Error("sessionId is null although the log named it before the deadline")
	}
}

// TestCancel: <name>.cancel deletes the Job and the result says cancelled.
func TestCancel(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{Labels: testcluster.RunForever(), LogLines: transcript(t, claudeTranscript)[:1]})
	e.drop("cancel-1", nil)
	d := e.startDaemon(true, nil)
	job := e.jobName("cancel-1")
	e.waitUntil("the run's pod to run", func() bool { return e.podPhase(job) == corev1.PodRunning })
	if err := os.WriteFile(filepath.Join(e.spool, "cancel-1.cancel"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	d.wait(t)
	res := e.result("cancel-1")
	if res.Status != result.StatusCancelled || deref(res.ErrorCode) != result.ErrCancelled {
		t.Fatalf("result: %s %s %q; want cancelled", res.Status, deref(res.ErrorCode), deref(res.ErrorMessage))
	}
	if !e.jobGone(job) {
		t.Error("the cancelled run's Job still exists")
	}
}

// TestJobDeletedBySomeoneElse: a Job deleted behind pcsync's back fails the
// run, saying so.
func TestJobDeletedBySomeoneElse(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{Labels: testcluster.RunForever()})
	e.drop("gone-1", nil)
	d := e.startDaemon(true, nil)
	job := e.jobName("gone-1")
	e.waitUntil("the run's pod to run", func() bool { return e.podPhase(job) == corev1.PodRunning })
	bg := metav1.DeletePropagationBackground
	if err := e.cs.BatchV1().Jobs(e.ns).Delete(context.Background(), job, metav1.DeleteOptions{PropagationPolicy: &bg}); err != nil {
		t.Fatal(err)
	}
	d.wait(t)
	res := e.result("gone-1")
	if res.Status != result.StatusFailed || !strings.Contains(deref(res.ErrorMessage), "deleted before the run finished, and not by pcsync") {
		t.Fatalf("result: %s %s %q; want failed, deleted by someone else", res.Status, deref(res.ErrorCode), deref(res.ErrorMessage))
	}
}

// TestDaemonRestartAdoptsTheJob: a daemon stopped mid-run (as SIGTERM
// does) leaves the Job running; the next daemon adopts it. The run has one
// Job, one result, and its log has every line once.
func TestDaemonRestartAdoptsTheJob(t *testing.T) {
	t.Parallel()
	lines := transcript(t, claudeTranscript)
	e := newEnv(t, envOptions{Labels: testcluster.SucceedAfter(5 * time.Second), LogLines: lines[:2]})
	e.drop("restart-1", nil)
	job := e.jobName("restart-1")

	first := e.startDaemon(false, nil)
	e.waitUntil("the first daemon to copy two log lines", func() bool {
		data, _ := os.ReadFile(filepath.Join(e.spool, "restart-1.log"))
		return strings.Count(string(data), "\n") == 2
	})
	first.stop(t)
	if e.jobGone(job) {
		t.Fatal("stopping the daemon deleted the run's Job")
	}
	if _, err := os.Stat(filepath.Join(e.spool, "restart-1.result.json")); err == nil {
		t.Fatal("the run has a result before it ended")
	}
	// The agent goes on writing while no daemon watches.
	if err := e.logs.Append(lines[2:]...); err != nil {
		t.Fatal(err)
	}

	second := e.startDaemon(true, nil)
	second.wait(t)
	second.waitEvent(t, "adopted", "restart-1")
	res := e.result("restart-1")
	if res.Status != result.StatusSucceeded {
		t.Fatalf("result: %s %s %q; want succeeded", res.Status, deref(res.ErrorCode), deref(res.ErrorMessage))
	}
	if diff := cmp.Diff(expectedFromTranscript(t, claudeTranscript), fieldsOf(res)); diff != "" {
		t.Errorf("result fields from the log (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(strings.Join(lines, "\n")+"\n", e.logFile("restart-1")); diff != "" {
		t.Errorf("restart-1.log (-want +got):\n%s", diff)
	}
	if n := e.auditCount("create", "jobs", ""); n != 1 {
		t.Errorf("%d Job creations in the namespace, want exactly 1", n)
	}
}

// TestAdoptionRepairsAMissingSecret: a daemon that stopped between creating
// the Job and its Secret left a Job whose pod waits; the next daemon
// creates the Secret when it adopts the Job.
func TestAdoptionRepairsAMissingSecret(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{Labels: testcluster.SucceedAfter(time.Second), LogLines: transcript(t, claudeTranscript)})
	e.drop("repair-1", nil)
	job := e.createJobAsEarlierDaemon("repair-1", nil)
	e.startDaemon(true, nil).wait(t)
	res := e.result("repair-1")
	if res.Status != result.StatusSucceeded {
		t.Fatalf("result: %s %s %q; want succeeded", res.Status, deref(res.ErrorCode), deref(res.ErrorMessage))
	}
	if n := e.auditCount("create", "secrets", job.Name); n != 1 {
		t.Errorf("%d creations of the run's Secret, want 1 (by the adopting daemon)", n)
	}
	if n := e.auditCount("create", "jobs", job.Name); n != 1 {
		t.Errorf("%d Job creations, want 1 (none by the adopting daemon)", n)
	}
}

// TestTwentyRunsConcurrencyTwo: twenty requests for an agent of
// concurrency 2 all succeed, and the cluster never runs more than two of
// its pods at once (watched from the test, in the order the API server
// recorded the changes).
func TestTwentyRunsConcurrencyTwo(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{Labels: testcluster.SucceedAfter(300 * time.Millisecond), Concurrency: 2,
		LogLines: transcript(t, claudeTranscript)})
	mostActive := e.watchMostActive()
	const n = 20
	for i := range n {
		e.drop(runName(i), nil)
	}
	e.startDaemon(true, nil).wait(t)
	for i := range n {
		if res := e.result(runName(i)); res.Status != result.StatusSucceeded {
			t.Errorf("%s: %s %s %q", runName(i), res.Status, deref(res.ErrorCode), deref(res.ErrorMessage))
		}
	}
	if got := mostActive(); got != 2 {
		t.Errorf("at most %d of the agent's pods ran at once, want exactly 2 (its concurrency)", got)
	}
	if got := e.auditCount("create", "jobs", ""); got != n {
		t.Errorf("%d Job creations, want %d", got, n)
	}
}

// watchMostActive watches the namespace's pods from now on; the function
// it returns stops the watch and says how many of them ran at once at most
// (not in a terminal phase, not being deleted; those already there
// included), in the order the API server recorded the changes. Pods, not
// Jobs: a run's slot is free once its agent ended, and its finished Job is
// kept (the Job controller marks it finished up to a second after its pod).
func (e *env) watchMostActive() func() int {
	e.t.Helper()
	list, err := e.cs.CoreV1().Pods(e.ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	w, err := e.cs.CoreV1().Pods(e.ns).Watch(context.Background(), metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		e.t.Fatal(err)
	}
	running := func(p *corev1.Pod) bool {
		return p.DeletionTimestamp == nil && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed
	}
	active := map[string]bool{}
	for _, p := range list.Items {
		if running(&p) {
			active[p.Name] = true
		}
	}
	maxActive := make(chan int, 1)
	go func() {
		most := len(active)
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			switch {
			case ev.Type == watch.Deleted || !running(p):
				delete(active, p.Name)
			case ev.Type == watch.Added || ev.Type == watch.Modified:
				active[p.Name] = true
			}
			most = max(most, len(active))
		}
		maxActive <- most
	}()
	return func() int {
		w.Stop()
		return <-maxActive
	}
}

// TestJobOfAnOlderPcsyncHoldsItsSlot: a Job that a pcsync before
// pcsync.io/agent created (its paperclip.io/agent-id then held the agent's
// name) is adopted by the restarted daemon and holds its agent's slot: with
// concurrency 1, the next run's Job is created only once it finished.
func TestJobOfAnOlderPcsyncHoldsItsSlot(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{Labels: testcluster.SucceedAfter(2 * time.Second), LogLines: transcript(t, claudeTranscript)})
	e.drop("older-1", nil)
	old := e.createJobAsEarlierDaemon("older-1", func(j *batchv1.Job) {
		delete(j.Labels, agentpod.LabelAgent)
		delete(j.Spec.Template.Labels, agentpod.LabelAgent)
	})
	if got, want := old.Labels[agentpod.LabelAgentID], e.buildJob("older-1").Labels[agentpod.LabelAgent]; got != want || want == "" {
		t.Fatalf("the older Job's %s is %q, want the agent's name %q", agentpod.LabelAgentID, got, want)
	}
	mostActive := e.watchMostActive()
	e.drop("newer-1", nil)
	d := e.startDaemon(true, nil)
	d.wait(t)
	d.waitEvent(t, "adopted", "older-1")
	for _, name := range []string{"older-1", "newer-1"} {
		if res := e.result(name); res.Status != result.StatusSucceeded {
			t.Errorf("%s: %s %s %q; want succeeded", name, res.Status, deref(res.ErrorCode), deref(res.ErrorMessage))
		}
	}
	if got := mostActive(); got != 1 {
		t.Errorf("at most %d of the agent's pods ran at once, want 1 (its concurrency; the older Job holds its slot)", got)
	}
}

func runName(i int) string { return "many-" + string(rune('a'+i/10)) + string(rune('0'+i%10)) }

// TestPodSecurityRestricted: the tenant namespace (from the real tenant
// manifests) enforces Pod Security "restricted", the runs' pods are
// admitted, and a pod that breaks the rules is refused — which the run
// reports from the Job's FailedCreate event, at once.
func TestPodSecurityRestricted(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{Labels: testcluster.SucceedAfter(200 * time.Millisecond), LogLines: transcript(t, claudeTranscript)})
	ns, err := e.cs.CoreV1().Namespaces().Get(context.Background(), e.ns, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, mode := range []string{"enforce", "audit", "warn"} {
		if got := ns.Labels["pod-security.kubernetes.io/"+mode]; got != "restricted" {
			t.Errorf("namespace label pod-security.kubernetes.io/%s = %q, want restricted", mode, got)
		}
	}
	e.drop("psa-ok", nil)
	first := e.startDaemon(true, nil)
	first.wait(t)
	// Stopped as a daemon process ends: the next one takes the state
	// directory over.
	first.stop(t)
	if res := e.result("psa-ok"); res.Status != result.StatusSucceeded || res.Job == nil || res.Job.Pod == "" {
		t.Fatalf("psa-ok: %s %s %q; want succeeded with a pod", res.Status, deref(res.ErrorCode), deref(res.ErrorMessage))
	}
	// A Job whose pod keeps its capabilities (an earlier daemon built it
	// wrong, say) is refused by admission; the adopting daemon explains it.
	e.drop("psa-caps", nil)
	e.createJobAsEarlierDaemon("psa-caps", func(j *batchv1.Job) {
		j.Spec.Template.Spec.Containers[0].SecurityContext.Capabilities = nil
	})
	e.startDaemon(true, nil).wait(t)
	res := e.result("psa-caps")
	if res.Status != result.StatusFailed || !strings.Contains(deref(res.ErrorMessage), "violates PodSecurity") {
		t.Fatalf("psa-root: %s %s %q; want failed, refused by Pod Security", res.Status, deref(res.ErrorCode), deref(res.ErrorMessage))
	}
}

// TestQuotaRefusal: with room for one pod in the company's quota, the second
// run's pod is refused by the ResourceQuota; after the grace period the run
// fails with quota_exceeded and the quota's message.
func TestQuotaRefusal(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{Labels: testcluster.RunForever(), Concurrency: 2,
		Company: map[string]any{"quota": map[string]any{"pods": 1}}})
	e.drop("quota-a", nil)
	e.drop("quota-b", nil)
	d := e.startDaemon(true, nil)
	var refused, other string
	e.waitUntil("one run to be refused by the quota", func() bool {
		for _, pair := range [][2]string{{"quota-a", "quota-b"}, {"quota-b", "quota-a"}} {
			if _, err := os.Stat(filepath.Join(e.spool, pair[0]+".result.json")); err == nil {
				refused, other = pair[0], pair[1]
				return true
			}
		}
		return false
	})
	res := e.result(refused)
	if res.Status != result.StatusFailed || deref(res.ErrorCode) != result.ErrQuotaExceeded || !strings.Contains(deref(res.ErrorMessage), "exceeded quota") {
		t.Fatalf("%s: %s %s %q; want failed quota_exceeded", refused, res.Status, deref(res.ErrorCode), deref(res.ErrorMessage))
	}
	if err := os.WriteFile(filepath.Join(e.spool, other+".cancel"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	d.wait(t)
}

// buildJob builds the Job pcsync creates for the request <name>.json in
// the spool (no nonce).
func (e *env) buildJob(name string) *batchv1.Job {
	e.t.Helper()
	r := parseRun(e.t, e.model, e.spool, name+".json", mustRead(e.t, filepath.Join(e.spool, name+".json")))
	in, err := NewInput(r, []string{"ANTHROPIC_API_KEY=" + testAPIKey}, BuildOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	job, err := BuildJob(in, BuildOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return job
}

// createJobAsEarlierDaemon does what a daemon that stopped right after
// creating a run's Job got done: the marker and the Job, no Secret. mutate,
// when set, changes the Job first.
func (e *env) createJobAsEarlierDaemon(name string, mutate func(*batchv1.Job)) *batchv1.Job {
	e.t.Helper()
	job := e.buildJob(name)
	nonce := newNonce()
	job.Annotations[AnnotationNonce] = nonce
	if mutate != nil {
		mutate(job)
	}
	recordAsEarlierDaemon(e.t, e.state, name, marker{RunID: job.Labels[agentpod.LabelRunID], Namespace: e.ns, Job: job.Name, Request: name + ".json", Nonce: nonce})
	created, err := e.cs.BatchV1().Jobs(e.ns).Create(context.Background(), job, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return created
}

// TestLookAlikeJobIsNotAdopted: a Job that someone else created under a
// run's name, with pcsync's labels and request annotation, before the run
// (no marker: pcsync never started the run; or a marker whose nonce the Job
// does not carry) is not adopted. The run fails saying a Job not created by
// pcsync holds its name, no Secret is created for it (it would hold the
// fleet's API keys), and the Job is left as it was.
func TestLookAlikeJobIsNotAdopted(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{Labels: testcluster.RunForever()})
	lookAlike := func(name string, nonce string) *batchv1.Job {
		job := e.buildJob(name)
		if nonce != "" {
			job.Annotations[AnnotationNonce] = nonce
		}
		created, err := e.cs.BatchV1().Jobs(e.ns).Create(context.Background(), job, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return created
	}
	// No marker: pcsync never started this run.
	e.drop("lookalike-none", nil)
	jobs := []*batchv1.Job{lookAlike("lookalike-none", "")}
	// A marker (a daemon that stopped after recording the run, before its
	// create) and a Job with another nonce. The marker is the per-run file
	// of an older pcsync: the journal takes it in.
	e.drop("lookalike-wrong", nil)
	writeLegacyMarker(t, e.state, "lookalike-wrong", marker{RunID: "lookalike-wrong", Namespace: e.ns,
		Job: e.jobName("lookalike-wrong"), Request: "lookalike-wrong.json", Nonce: newNonce()})
	jobs = append(jobs, lookAlike("lookalike-wrong", newNonce()))

	e.startDaemon(true, nil).wait(t)

	for _, job := range jobs {
		name := job.Labels[agentpod.LabelRunID]
		res := e.result(name)
		want := "a Job not created by pcsync holds the run's name Job/" + e.ns + "/" + job.Name
		if res.Status != result.StatusFailed || !strings.Contains(deref(res.ErrorMessage), want) {
			t.Errorf("%s result: %s %s %q; want failed, %q", name, res.Status, deref(res.ErrorCode), deref(res.ErrorMessage), want)
		}
		if _, err := e.cs.CoreV1().Secrets(e.ns).Get(context.Background(), job.Name, metav1.GetOptions{}); !isNotFound(err) {
			t.Errorf("Secret/%s/%s: get says %v, want not found (no Secret for a Job pcsync did not create)", e.ns, job.Name, err)
		}
		if n := e.auditCount("create", "secrets", job.Name); n != 0 {
			t.Errorf("%d creations of Secret %s, want none", n, job.Name)
		}
		got, err := e.cs.BatchV1().Jobs(e.ns).Get(context.Background(), job.Name, metav1.GetOptions{})
		if err != nil {
			t.Errorf("the look-alike Job %s: %v (it must be left in place)", job.Name, err)
		} else if got.UID != job.UID || got.DeletionTimestamp != nil {
			t.Errorf("the look-alike Job %s was replaced or deleted (uid %s → %s)", job.Name, job.UID, got.UID)
		}
		for _, verb := range []string{"create", "delete", "update", "patch"} {
			want := 0
			if verb == "create" {
				want = 1 // the test's own
			}
			if n := e.auditCount(verb, "jobs", job.Name); n != want {
				t.Errorf("%d %s requests on Job %s, want %d", n, verb, job.Name, want)
			}
		}
	}
	secrets, err := e.cs.CoreV1().Secrets(e.ns).List(context.Background(), metav1.ListOptions{LabelSelector: agentpod.LabelManagedBy + "=" + agentpod.ManagedByValue + "," + agentpod.LabelRole + "=" + agentpod.RoleAgent})
	if err != nil {
		t.Fatal(err)
	}
	if len(secrets.Items) != 0 {
		t.Errorf("%d per-run Secrets in %s, want none", len(secrets.Items), e.ns)
	}
}

// podPhase is the phase of the Job's newest pod ("" when none).
func (e *env) podPhase(job string) corev1.PodPhase {
	pods, err := e.cs.CoreV1().Pods(e.ns).List(context.Background(), metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=" + job})
	if err != nil || len(pods.Items) == 0 {
		return ""
	}
	return pods.Items[len(pods.Items)-1].Status.Phase
}

func mustRead(t testing.TB, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// TestConcurrencyCountsJobsInTheCluster: the executor counts the agent's
// running Jobs from the cluster. A Job left by an earlier daemon whose
// request is gone (so nobody adopts it) holds the agent's only slot: the
// next run starts when that Job has finished, not before.
func TestConcurrencyCountsJobsInTheCluster(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{Labels: testcluster.SucceedAfter(3 * time.Second), LogLines: transcript(t, claudeTranscript)})
	list, err := e.cs.BatchV1().Jobs(e.ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := e.cs.BatchV1().Jobs(e.ns).Watch(context.Background(), metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	maxActive := make(chan int, 1)
	go func() {
		active, most := map[string]bool{}, 0
		for ev := range w.ResultChan() {
			j, ok := ev.Object.(*batchv1.Job)
			if !ok {
				continue
			}
			if ev.Type == watch.Deleted || j.DeletionTimestamp != nil || jobFinished(j) {
				delete(active, j.Name)
			} else {
				active[j.Name] = true
			}
			most = max(most, len(active))
		}
		maxActive <- most
	}()

	e.drop("orphan", nil)
	first := e.startDaemon(false, nil)
	first.waitEvent(t, "started", "orphan")
	first.stop(t)
	if err := os.Remove(filepath.Join(e.spool, "orphan.json")); err != nil {
		t.Fatal(err)
	}
	e.drop("next", nil)
	e.startDaemon(true, nil).wait(t)
	w.Stop()
	if res := e.result("next"); res.Status != result.StatusSucceeded {
		t.Fatalf("next: %s %s %q", res.Status, deref(res.ErrorCode), deref(res.ErrorMessage))
	}
	if got := <-maxActive; got != 1 {
		t.Errorf("%d of the agent's Jobs were active at once, want 1 (its concurrency)", got)
	}
}

// TestRecordedRunWithoutJob: a daemon that stopped between recording a run
// and creating its Job left a record whose create was never answered; the
// next daemon starts the run (one Job, succeeded). A run whose Job was
// created (the record says so) and is gone, or whose record is older than
// the Jobs' TTL, is not started again: it fails saying the Job is gone.
func TestRecordedRunWithoutJob(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{Labels: testcluster.SucceedAfter(time.Second), Concurrency: 3, LogLines: transcript(t, claudeTranscript)})
	record := func(name string, created bool, at time.Time) {
		e.drop(name, nil)
		recordAsEarlierDaemon(t, e.state, name, marker{RunID: name, Namespace: e.ns, Job: e.jobName(name),
			Request: name + ".json", CreatedAt: at, Nonce: newNonce(), Created: created})
	}
	now := time.Now().UTC()
	record("never-created", false, now)
	record("created-then-gone", true, now)
	record("older-than-ttl", false, now.Add(-time.Hour)) // the default TTL is 900 s
	e.startDaemon(true, nil).wait(t)

	got := map[string]string{}
	for _, name := range []string{"never-created", "created-then-gone", "older-than-ttl"} {
		res := e.result(name)
		got[name] = string(res.Status)
		if name != "never-created" && !strings.Contains(deref(res.ErrorMessage), "is gone and left no trace") {
			t.Errorf("%s: error %q does not say the Job is gone", name, deref(res.ErrorMessage))
		}
	}
	want := map[string]string{"never-created": "succeeded", "created-then-gone": "failed", "older-than-ttl": "failed"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("results (-want +got):\n%s", diff)
	}
	if n := e.auditCount("create", "jobs", e.jobName("never-created")); n != 1 {
		t.Errorf("Job of the never-created run: %d creates, want 1", n)
	}
	for _, name := range []string{"created-then-gone", "older-than-ttl"} {
		if n := e.auditCount("create", "jobs", e.jobName(name)); n != 0 {
			t.Errorf("%s: %d Job creates, want none (the run is not started again)", name, n)
		}
	}
}
