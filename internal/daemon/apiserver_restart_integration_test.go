//go:build integration

package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/pcsync/pcsync/internal/lib/kube"
	"github.com/pcsync/pcsync/internal/testing/testcluster"
	"github.com/pcsync/pcsync/pkg/apply"
	"github.com/pcsync/pcsync/pkg/config"
	"github.com/pcsync/pcsync/pkg/health"
	"github.com/pcsync/pcsync/pkg/reconcile"
	"github.com/pcsync/pcsync/pkg/result"
	"github.com/pcsync/pcsync/pkg/runs"
	"github.com/pcsync/pcsync/pkg/runs/kubeexec"
	"github.com/pcsync/pcsync/pkg/runs/spool"
)

// The scenario of TestAPIServerGoesAway.
const (
	// inFlight runs are running (Job, pod, log followed) when the API
	// server stops; duringOutage more requests arrive while it is away.
	inFlight     = 50
	duringOutage = 10
	// outage is how long kube-apiserver stays away.
	outage = 20 * time.Second
	// fleetBefore companies are applied first; the reconcile that is in
	// progress when the API server stops removes f00 and adds
	// f<fleetBefore>..f<fleetAfter-1>.
	fleetBefore, fleetAfter = 30, 60
	// gatedCompany's Namespace is the request that the in-progress
	// reconcile is held at until the API server has stopped.
	gatedCompany = 45
	// restartUA and applyUA are the user agents of the executor and of the
	// reconcile loop's applier, to find their requests in the audit log.
	restartUA = "pcsync-test-restart-runs"
	applyUA   = "pcsync-test-restart-apply"
)

// TestAPIServerGoesAway: the daemon with the Kubernetes executor and the
// reconcile loop (with --prune) on a control plane of its own. 50 runs are
// in flight (pods running, logs followed) and a reconcile is in the middle
// of its apply when kube-apiserver goes away (SIGKILL: every connection
// breaks at once); 10 more requests arrive while it is away; it starts
// again 20 s later (same port, certificates and etcd). Meanwhile /readyz says "API server
// unreachable", and no longer once it is back. The agents write their logs
// before, during and after the outage. Every run ends with exactly one
// result (succeeded) and exactly one Job created (audit log), and its
// <name>.log is the pod's log exactly: no gap, no duplicate. The reconcile
// resumes and completes: every company of the config is in the cluster, the
// one removed from it is pruned and nothing else is deleted, and the ApplySet
// inventory lists every kind and tenant namespace.
func TestAPIServerGoesAway(t *testing.T) {
	c := ownCluster(t)
	lines := agentTranscript(t)
	before, during, after := lines[:15], lines[15:30], lines[30:]

	const prefix = "t-"
	root := t.TempDir()
	cfgDir, spoolDir := filepath.Join(root, "config"), filepath.Join(root, "spool")
	for _, d := range []string{cfgDir, spoolDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	fleet := func(from, to int) map[string]string {
		files := map[string]string{}
		for i := from; i < to; i++ {
			files[fleetSlug(i)+".yaml"] = company(fleetSlug(i), "")
		}
		return files
	}
	// Egress mode standard: in proxy mode each of the fleet's tenants runs
	// an egress proxy pod, and 60 of them beside the 50 runs would fill the
	// kwok node's 110 pods, leaving the runs that arrive during the outage
	// unscheduled. The outage, not egress, is this test's subject.
	writeAtomic(t, filepath.Join(cfgDir, "settings.yaml"), fmt.Sprintf(
		"apiVersion: pcsync.io/v1alpha1\nkind: Settings\nmetadata: {name: test}\nspec:\n  namespacePrefix: %s\n"+
			"  egress: {mode: standard}\n"+
			"  images: {allowList: [\"ghcr.io/paperclipai/*\"]}\n", prefix))
	writeAtomic(t, filepath.Join(cfgDir, "runs.yaml"), runsCompany())
	for name, content := range fleet(0, fleetBefore) {
		writeAtomic(t, filepath.Join(cfgDir, name), content)
	}
	runsNS := prefix + "runs"
	src, err := c.ServeLogs(context.Background(), runsNS, nil, before)
	if err != nil {
		t.Fatal(err)
	}

	gate := newRequestGate("/namespaces/" + prefix + fleetSlug(gatedCompany))
	d := startRestartDaemon(t, c, cfgDir, spoolDir, gate)
	begin := time.Now()
	phase := func(what string) { t.Logf("%6.1fs %s", time.Since(begin).Seconds(), what) }
	d.waitReconciled(t, "the first reconcile", time.Time{})
	kinds := applySetKinds(t, c)
	phase("first reconcile done")

	// 50 runs in flight: pods running, the first lines of their logs copied.
	var names []string
	for i := range inFlight {
		names = append(names, fmt.Sprintf("r%02d", i))
		dropPrompted(t, spoolDir, names[i])
	}
	waitUntil(t, "every run's pod to run and its first lines to be copied", func(ctx context.Context) (bool, string) {
		pods, err := c.Client().CoreV1().Pods(runsNS).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		running := 0
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning {
				running++
			}
		}
		if running < inFlight {
			return false, fmt.Sprintf("%d of %d pods running", running, inFlight)
		}
		for _, n := range names {
			if got := logLines(spoolDir, n); got < len(before) {
				return false, fmt.Sprintf("%s.log has %d of %d lines", n, got, len(before))
			}
		}
		return true, ""
	})
	phase(fmt.Sprintf("%d runs in flight", inFlight))

	// A reconcile in progress: the config drops f00 and adds 30 companies;
	// its apply is held at f45's Namespace until the API server is gone.
	gate.arm()
	if err := os.Remove(filepath.Join(cfgDir, fleetSlug(0)+".yaml")); err != nil {
		t.Fatal(err)
	}
	for name, content := range fleet(fleetBefore, fleetAfter) {
		writeAtomic(t, filepath.Join(cfgDir, name), content)
	}
	select {
	case <-gate.hit:
	case <-time.After(waitDeadline):
		t.Fatal("the reconcile of the changed config never reached f45's Namespace")
	}

	stopped := time.Now()
	if err := c.KillAPIServer(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // whatever happens below, the cluster gets its API server back
		if err := c.StartAPIServer(context.Background()); err != nil {
			t.Error(err)
		}
	})
	gate.release()
	phase("kube-apiserver killed with the runs in flight and a reconcile in progress")

	// While it is away: the agents write on, more requests arrive, /readyz
	// says why the daemon waits.
	if err := src.Append(during...); err != nil {
		t.Fatal(err)
	}
	for i := range duringOutage {
		n := fmt.Sprintf("late%02d", i)
		names = append(names, n)
		dropPrompted(t, spoolDir, n)
	}
	unreachable := waitCondition(t, d, "APIServerReachable=False", func(cond health.Condition) bool {
		return cond.Status == health.StatusFalse
	})
	if !strings.Contains(unreachable.Message, "API server unreachable") {
		t.Errorf("/readyz condition %s during the outage: %q, want it to say \"API server unreachable\"",
			daemonCondAPIServer, unreachable.Message)
	}
	phase("/readyz says: " + unreachable.Message)
	time.Sleep(time.Until(stopped.Add(outage)))

	restarted := time.Now()
	if err := c.StartAPIServer(context.Background()); err != nil {
		t.Fatal(err)
	}
	phase(fmt.Sprintf("kube-apiserver ready again, %s after it went away", time.Since(stopped).Round(time.Millisecond)))
	waitCondition(t, d, "APIServerReachable=True", func(cond health.Condition) bool {
		return cond.Status == health.StatusTrue
	})
	phase("/readyz says the API server is reachable")
	if err := src.Append(after...); err != nil {
		t.Fatal(err)
	}

	// The followers resume where they were: every log gets every line
	// while the pods still run.
	waitUntil(t, "every run's log to have every line of its pod's log", func(context.Context) (bool, string) {
		for _, n := range names {
			if got := logLines(spoolDir, n); got < len(lines) {
				return false, fmt.Sprintf("%s.log has %d of %d lines", n, got, len(lines))
			}
		}
		return true, ""
	})
	phase("every log has every line")
	// The agents end.
	pods, err := c.Client().CoreV1().Pods(runsNS).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": testcluster.SucceedAfter(0)}})
		if _, err := c.Client().CoreV1().Pods(runsNS).Patch(context.Background(), p.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatalf("end pod %s: %v", p.Name, err)
		}
	}
	waitUntil(t, "every run's result", func(context.Context) (bool, string) {
		finished := d.finishedCounts()
		for _, n := range names {
			if finished[n] == 0 {
				return false, n + " has no result yet"
			}
		}
		return true, ""
	})
	phase("every run has its result")

	// Runs: one result each, succeeded, one Job each, the log exactly the pod's.
	wantLog := strings.Join(lines, "\n") + "\n"
	finished := d.finishedCounts()
	creates := jobCreates(t, c, runsNS)
	for _, n := range names {
		res, err := result.Read(filepath.Join(spoolDir, n+result.Suffix))
		if err != nil {
			t.Errorf("%s: %v", n, err)
			continue
		}
		if res.Status != result.StatusSucceeded {
			t.Errorf("%s: result %s %s %q, want succeeded", n, res.Status, deref(res.ErrorCode), deref(res.ErrorMessage))
		}
		if finished[n] != 1 {
			t.Errorf("%s: %d results written, want exactly 1", n, finished[n])
		}
		job := kubeexec.JobName("runs", "coder", n)
		if got := creates[job]; got != 1 {
			t.Errorf("%s: Job %s created %d times (audit log), want exactly 1", n, job, got)
		}
		data, err := os.ReadFile(filepath.Join(spoolDir, n+".log"))
		if err != nil {
			t.Errorf("%s: %v", n, err)
		} else if diff := cmp.Diff(wantLog, string(data)); diff != "" {
			t.Errorf("%s.log is not the pod's log (-pod +file):\n%s", n, diff)
		}
	}
	if len(creates) != len(names) {
		t.Errorf("Jobs created in %s: %d names, want %d", runsNS, len(creates), len(names))
	}

	// Reconcile: the one in progress failed with the API server, a later
	// one completed.
	out := d.waitReconciled(t, "a reconcile after the restart", restarted)
	if !out.ConfigChanged {
		t.Errorf("the first reconcile that succeeded after the restart (%s) applied nothing new: the changed config was applied before the API server stopped", out.Trigger)
	}
	failedDuring := false
	for _, o := range d.reconciles() {
		if o.Err != nil && !o.Started.After(restarted) && o.Started.After(stopped.Add(-time.Minute)) {
			failedDuring = true
		}
	}
	if !failedDuring {
		t.Error("no reconcile failed while the API server was away: the scenario did not happen")
	}
	assertFleet(t, c, prefix, kinds)
	if t.Failed() {
		t.Logf("daemon outcomes: %s", d.describeReconciles())
	}
}

// daemonCondAPIServer is the condition the test reads (the daemon's constant).
const daemonCondAPIServer = CondAPIServerReachable

func fleetSlug(i int) string { return fmt.Sprintf("f%02d", i) }

// runsCompany is the company the runs belong to: room for every run at once.
func runsCompany() string {
	return `apiVersion: pcsync.io/v1alpha1
kind: Company
metadata: {name: runs}
spec:
  id: id-runs
  quota: {pods: 100, requestsCpu: "100", requestsMemory: 1000Gi, limitsCpu: "400", limitsMemory: 1000Gi, limitsEphemeralStorage: 2000Gi}
  agents:
    - name: coder
      adapter: claude_local
      model: claude-sonnet-4-6
      concurrency: 100
      labels: {"sim.pcsync.io/outcome": run}
`
}

// agentTranscript is a real Claude Code transcript of 46 lines.
func agentTranscript(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "testdata", "agent-samples", "claude-obers-multiturn-success.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
}

// dropPrompted writes a run request of the runs company with a prompt that
// appears nowhere in the transcript (a run's log is redacted of its prompt).
func dropPrompted(t *testing.T, spoolDir, name string) {
	t.Helper()
	data, err := json.Marshal(map[string]any{"apiVersion": config.APIVersion, "kind": "Run", "company": "runs", "agent": "coder",
		"prompt": "Keep going whatever the API server does."})
	if err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(spoolDir, "."+name+".tmp")
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(spoolDir, name+".json")); err != nil {
		t.Fatal(err)
	}
}

// logLines counts the complete lines of a run's <name>.log.
func logLines(spoolDir, name string) int {
	data, _ := os.ReadFile(filepath.Join(spoolDir, name+".log"))
	return strings.Count(string(data), "\n")
}

// ownCluster starts a control plane for this test alone: it stops its API
// server, which the package's shared cluster must keep.
func ownCluster(t *testing.T) *testcluster.Cluster {
	t.Helper()
	opts := testcluster.DefaultOptions()
	opts.Logf = t.Logf
	opts.KeepWorkDir = os.Getenv("PCSYNC_TEST_KEEP_WORKDIR") != ""
	c, err := testcluster.Start(context.Background(), opts)
	if err != nil {
		t.Fatalf("test cluster: %v", err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Error(err)
		}
	})
	return c
}

// waitUntil polls cond (with the reason it does not hold yet) until it
// holds; the deadline only bounds a wait that would never end.
func waitUntil(t *testing.T, what string, cond func(ctx context.Context) (bool, string)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitDeadline)
	defer cancel()
	last, logged := "", time.Now()
	for {
		ok, why := cond(ctx)
		if ok {
			return
		}
		last = why
		if time.Since(logged) > 10*time.Second {
			t.Logf("still waiting for %s: %s", what, why)
			logged = time.Now()
		}
		select {
		case <-ctx.Done():
			t.Fatalf("gave up waiting for %s: %s", what, last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// requestGate holds the requests whose path contains a string, once armed,
// until it is released: a reconcile's apply is thereby caught in the middle.
type requestGate struct {
	match    string
	mu       sync.Mutex
	armed    bool
	hit      chan struct{}
	hitOnce  sync.Once
	released chan struct{}
	relOnce  sync.Once
}

func newRequestGate(match string) *requestGate {
	return &requestGate{match: match, hit: make(chan struct{}), released: make(chan struct{})}
}

func (g *requestGate) arm() {
	g.mu.Lock()
	g.armed = true
	g.mu.Unlock()
}

func (g *requestGate) release() { g.relOnce.Do(func() { close(g.released) }) }

// wrap is a rest.Config WrapTransport.
func (g *requestGate) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		g.mu.Lock()
		armed := g.armed
		g.mu.Unlock()
		if armed && strings.Contains(req.URL.Path, g.match) {
			g.hitOnce.Do(func() { close(g.hit) })
			select {
			case <-g.released:
			case <-req.Context().Done():
				return nil, req.Context().Err()
			}
		}
		return rt.RoundTrip(req)
	})
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// restartDaemon is the daemon of TestAPIServerGoesAway.
type restartDaemon struct {
	addr     string
	mu       sync.Mutex
	outcomes []reconcile.Outcome
	finished map[string]int
}

// startRestartDaemon runs the daemon as `pcsync daemon --executor
// kubernetes --prune` wires it, with short retry and probe intervals.
func startRestartDaemon(t *testing.T, c *testcluster.Cluster, cfgDir, spoolDir string, gate *requestGate) *restartDaemon {
	t.Helper()
	logger := slog.New(slog.DiscardHandler)
	if testing.Verbose() {
		logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	d := &restartDaemon{finished: map[string]int{}}

	acfg := c.RESTConfig()
	acfg.UserAgent = applyUA
	acfg.Wrap(gate.wrap)
	mo := apply.DefaultManagerOptions()
	mo.ApplySet = apply.ParentRef{Name: "pcsync", Namespace: "pcsync-system"}
	mo.Logger = logger
	m, err := apply.NewManager(acfg, mo)
	if err != nil {
		t.Fatal(err)
	}
	probe, err := kubernetes.NewForConfig(c.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}

	o := DefaultOptions(cfgDir)
	o.Logger, o.Applier, o.MetricsAddress = logger, m, "127.0.0.1:0"
	o.APIServer, o.APIServerProbeInterval = probe.Discovery().RESTClient(), 500*time.Millisecond
	o.Reconcile.Debounce = 100 * time.Millisecond
	o.Reconcile.Interval = time.Hour
	o.Reconcile.RetryMin = 500 * time.Millisecond
	o.Reconcile.Apply.Prune = true
	o.Reconcile.Observe = func(out reconcile.Outcome) {
		d.mu.Lock()
		d.outcomes = append(d.outcomes, out)
		d.mu.Unlock()
	}
	ro := spool.DefaultOptions(spoolDir)
	ro.RescanInterval = 500 * time.Millisecond
	ro.Logger = nil
	ro.Observe = func(ev spool.Event) {
		if ev.Kind == spool.EventFinished {
			d.mu.Lock()
			d.finished[ev.Name]++
			d.mu.Unlock()
		}
	}
	o.Runs = &ro
	stateDir := ro.StateDir
	o.NewExecutor = func(ctx context.Context) (runs.Executor, error) {
		cfg := c.RESTConfig()
		kube.DefaultFlags().ConfigureRateLimits(cfg)
		cfg.UserAgent = restartUA
		ko := kubeexec.DefaultOptions()
		ko.StateDir = stateDir
		ko.Logger = logger
		ko.Environ = func() []string { return []string{"ANTHROPIC_API_KEY=sk-ant-restart-test-0c1d", "PATH=/usr/bin"} }
		ko.LogReconnectDelay = 200 * time.Millisecond
		return kubeexec.New(ctx, cfg, ko)
	}
	listening := make(chan string, 1)
	o.OnListen = func(a net.Addr) { listening <- a.String() }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, o) }()
	select {
	case d.addr = <-listening:
	case err := <-done:
		cancel()
		t.Fatalf("daemon: %v", err)
	case <-time.After(waitDeadline):
		cancel()
		t.Fatal("the daemon does not listen")
	}
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("daemon: %v", err)
			}
		case <-time.After(time.Minute):
			t.Error("the daemon did not stop within a minute")
		}
	})
	return d
}

func (d *restartDaemon) reconciles() []reconcile.Outcome {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.outcomes)
}

func (d *restartDaemon) finishedCounts() map[string]int {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := map[string]int{}
	for k, v := range d.finished {
		out[k] = v
	}
	return out
}

func (d *restartDaemon) describeReconciles() string {
	var b strings.Builder
	for _, o := range d.reconciles() {
		fmt.Fprintf(&b, "\n  %s %s stage=%q err=%v", o.Started.Format("15:04:05.000"), o.Trigger, o.FailedStage, firstLine(o.Err))
	}
	return b.String()
}

func firstLine(err error) string {
	if err == nil {
		return ""
	}
	s, _, _ := strings.Cut(err.Error(), "\n")
	return s
}

// waitReconciled waits for a successful reconcile that started after since.
func (d *restartDaemon) waitReconciled(t *testing.T, what string, since time.Time) reconcile.Outcome {
	t.Helper()
	var got reconcile.Outcome
	waitUntil(t, what, func(context.Context) (bool, string) {
		for _, o := range d.reconciles() {
			if o.Err == nil && o.Started.After(since) {
				got = o
				return true, ""
			}
		}
		return false, "outcomes so far:" + d.describeReconciles()
	})
	return got
}

// waitCondition polls the daemon's /readyz until the API server condition
// satisfies ok, and returns it.
func waitCondition(t *testing.T, d *restartDaemon, what string, ok func(health.Condition) bool) health.Condition {
	t.Helper()
	var got health.Condition
	waitUntil(t, "/readyz "+what, func(context.Context) (bool, string) {
		body, err := httpGet("http://" + d.addr + "/readyz")
		if err != nil {
			return false, err.Error()
		}
		var r health.Report
		if err := json.Unmarshal([]byte(body), &r); err != nil {
			return false, err.Error()
		}
		for _, cond := range r.Conditions {
			if cond.Type == CondAPIServerReachable {
				got = cond
				return ok(cond), body
			}
		}
		return false, body
	})
	return got
}

// jobCreates counts the successful Job creations in a namespace by name.
func jobCreates(t *testing.T, c *testcluster.Cluster, ns string) map[string]int {
	t.Helper()
	evs, err := c.AuditEvents(func(a testcluster.AuditEvent) bool {
		return a.Verb == "create" && a.ObjectRef != nil && a.ObjectRef.Resource == "jobs" && a.ObjectRef.Namespace == ns &&
			a.ResponseStatus != nil && a.ResponseStatus.Code == http.StatusCreated
	})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, ev := range evs {
		out[ev.ObjectRef.Name]++
	}
	return out
}

// assertFleet checks the cluster after the reconcile: f01..f59 and runs
// applied, f00 pruned (and nothing else deleted by the applier), the
// ApplySet parent listing every tenant namespace.
func assertFleet(t *testing.T, c *testcluster.Cluster, prefix, kinds string) {
	t.Helper()
	ctx := context.Background()
	cs := c.Client()
	want := []string{prefix + "runs"}
	for i := 1; i < fleetAfter; i++ {
		want = append(want, prefix+fleetSlug(i))
	}
	for _, ns := range want {
		q, err := cs.CoreV1().ResourceQuotas(ns).Get(ctx, "paperclip-quota", metav1.GetOptions{})
		if err != nil {
			t.Errorf("tenant %s: %v", ns, err)
			continue
		}
		if q.DeletionTimestamp != nil {
			t.Errorf("tenant %s: its ResourceQuota is being deleted", ns)
		}
		n, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if err != nil || n.DeletionTimestamp != nil {
			t.Errorf("tenant namespace %s: %v (deleting: %v)", ns, err, err == nil && n.DeletionTimestamp != nil)
		}
	}
	gone := prefix + fleetSlug(0)
	if n, err := cs.CoreV1().Namespaces().Get(ctx, gone, metav1.GetOptions{}); err == nil && n.DeletionTimestamp == nil {
		t.Errorf("namespace %s of the company removed from the config was not pruned", gone)
	}
	deletes, err := c.AuditEvents(func(a testcluster.AuditEvent) bool {
		return a.UserAgent == applyUA && (a.Verb == "delete" || a.Verb == "deletecollection")
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range deletes {
		if ev.ObjectRef == nil || (ev.ObjectRef.Namespace != gone && !(ev.ObjectRef.Resource == "namespaces" && ev.ObjectRef.Name == gone)) {
			t.Errorf("the applier deleted what the config still holds: %s %s", ev.Verb, ev.RequestURI)
		}
	}
	parent, err := cs.CoreV1().Secrets("pcsync-system").Get(ctx, "pcsync", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("ApplySet parent: %v", err)
	}
	nss := strings.Split(parent.Annotations[apply.AnnotationAdditionalNamespaces], ",")
	slices.Sort(nss)
	wantNS := slices.Clone(want)
	slices.Sort(wantNS)
	if diff := cmp.Diff(wantNS, nss); diff != "" {
		t.Errorf("ApplySet parent %s (-want +got):\n%s", apply.AnnotationAdditionalNamespaces, diff)
	}
	if got := parent.Annotations[apply.AnnotationContainsGroupKinds]; got != kinds {
		t.Errorf("ApplySet parent %s = %q, want %q as before the outage", apply.AnnotationContainsGroupKinds, got, kinds)
	}
	// Every member of the ApplySet still carries its label.
	for _, ns := range want {
		sas, err := cs.CoreV1().ServiceAccounts(ns).List(ctx, metav1.ListOptions{LabelSelector: apply.LabelPartOf})
		if err != nil || len(sas.Items) == 0 {
			t.Errorf("tenant %s: no ServiceAccount of the ApplySet (%v)", ns, err)
		}
	}
}

// applySetKinds returns the ApplySet parent's kinds annotation.
func applySetKinds(t *testing.T, c *testcluster.Cluster) string {
	t.Helper()
	parent, err := c.Client().CoreV1().Secrets("pcsync-system").Get(context.Background(), "pcsync", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("ApplySet parent: %v", err)
	}
	return parent.Annotations[apply.AnnotationContainsGroupKinds]
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
