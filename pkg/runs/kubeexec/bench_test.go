//go:build integration

package kubeexec

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/pcsync/pcsync/internal/lib/agentpod"
	"github.com/pcsync/pcsync/internal/lib/kube"
	"github.com/pcsync/pcsync/internal/testing/testcluster"
	"github.com/pcsync/pcsync/pkg/result"
	"github.com/pcsync/pcsync/pkg/runs"
)

// benchOptions give one agent room for every run at once: concurrency n, a
// quota that never refuses, and the smallest resources the default
// LimitRange allows.
func benchOptions(n int, labels map[string]string, lines []string) envOptions {
	return envOptions{
		Labels: labels, Concurrency: n, LogLines: lines,
		Company: map[string]any{"quota": map[string]any{
			"pods": 5000, "requestsCpu": "1000", "requestsMemory": "4000Gi", "limitsCpu": "1000", "limitsMemory": "4000Gi",
			"limitsEphemeralStorage": "50000Gi", // 5,000 pods at the LimitRange's default 10Gi
		}},
		Agent: map[string]any{"resources": map[string]any{
			"requests": map[string]any{"cpu": "100m", "memory": "128Mi"},
			"limits":   map[string]any{"cpu": "100m", "memory": "128Mi"},
		}},
	}
}

func quiet(o *Options) { o.Logger = slog.New(slog.DiscardHandler) }

// watchTimes records, from the benchmark's own informers, when each run's
// Job was first seen and when its pod was first seen in a terminal phase.
type watchTimes struct {
	mu      sync.Mutex
	jobAt   map[string]time.Time
	podDone map[string]time.Time
	stop    func()
}

func (e *env) watchRuns(b *testing.B) *watchTimes {
	b.Helper()
	wt := &watchTimes{jobAt: map[string]time.Time{}, podDone: map[string]time.Time{}}
	ctx, cancel := context.WithCancel(context.Background())
	f := informers.NewSharedInformerFactoryWithOptions(e.cs, 0, informers.WithNamespace(e.ns),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.LabelSelector = agentpod.LabelManagedBy + " in (" + agentpod.ManagedByValue + "," + bareManagedBy + ")"
		}))
	record := func(m map[string]time.Time, obj any, ok func(any) bool) {
		mo, isObj := obj.(metav1.Object)
		if !isObj || !ok(obj) {
			return
		}
		now := time.Now()
		wt.mu.Lock()
		if _, seen := m[mo.GetLabels()[agentpod.LabelRunID]]; !seen {
			m[mo.GetLabels()[agentpod.LabelRunID]] = now
		}
		wt.mu.Unlock()
	}
	always := func(any) bool { return true }
	podDone := func(obj any) bool {
		p, ok := obj.(*corev1.Pod)
		return ok && (p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed)
	}
	_, _ = f.Batch().V1().Jobs().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { record(wt.jobAt, obj, always) },
		UpdateFunc: func(_, obj any) { record(wt.jobAt, obj, always) },
	})
	_, _ = f.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { record(wt.podDone, obj, podDone) },
		UpdateFunc: func(_, obj any) { record(wt.podDone, obj, podDone) },
	})
	f.Start(ctx.Done())
	f.WaitForCacheSync(ctx.Done())
	wt.stop = func() { cancel(); f.Shutdown() }
	return wt
}

// dropAll writes n requests as hidden temp files, then renames them all in
// at once, and returns when each was renamed.
func (e *env) dropAll(b *testing.B, names []string) map[string]time.Time {
	b.Helper()
	for _, name := range names {
		data := fmt.Sprintf(`{"apiVersion":"pcsync.io/v1alpha1","kind":"Run","company":%q,"agent":%q,"prompt":"benchmark run %s"}`, e.slug, agentName, name)
		if err := os.WriteFile(filepath.Join(e.spool, "."+name+".tmp"), []byte(data), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	at := make(map[string]time.Time, len(names))
	for _, name := range names {
		if err := os.Rename(filepath.Join(e.spool, "."+name+".tmp"), filepath.Join(e.spool, name+".json")); err != nil {
			b.Fatal(err)
		}
		at[name] = time.Now()
	}
	return at
}

// waitFinished waits for n EventFinished of the daemon.
func (d *daemonRun) waitFinished(b *testing.B, n int, within time.Duration) {
	b.Helper()
	deadline := time.After(within)
	for range n {
		select {
		case <-d.finished:
		case <-deadline:
			b.Fatalf("not every run finished within %s", within)
		}
	}
}

func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(float64(len(s)-1) * p)
	return s[i]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// procStatusMiB reads a field (VmRSS, VmHWM) of /proc/self/status in MiB.
func procStatusMiB(b *testing.B, field string) float64 {
	b.Helper()
	return procStatusMiBOf(b, "/proc/self/status", field)
}

// procStatusMiBOf reads a field of a /proc/<pid>/status file in MiB.
func procStatusMiBOf(b *testing.B, path, field string) float64 {
	b.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			if err != nil {
				b.Fatal(err)
			}
			return kb / 1024
		}
	}
	b.Fatalf("%s has no %s", path, field)
	return 0
}

// BenchmarkKubeExecutor200 drops 200 requests at once into the spool of a
// running daemon with the Kubernetes executor, on the test control plane
// (kwok pods finish 1 s after they run; their log is a real Claude
// transcript). It reports the time from a request's rename to its Job being
// visible to a watch and from its pod's terminal phase (as a watch sees it)
// to its result file, at the 50th and 99th percentile, and the executor's
// API requests per run (counted by kube.RequestCounter on its client,
// informer start-up excluded: a warm-up run comes first).
func BenchmarkKubeExecutor200(b *testing.B) {
	const n = 200
	lines := transcript(b, claudeTranscript)
	for range b.N {
		e := newEnv(b, benchOptions(n, testcluster.SucceedAfter(time.Second), lines))
		counter := &kube.RequestCounter{}
		d := e.startDaemonWith(false, counter, quiet)
		wt := e.watchRuns(b)
		e.dropAll(b, []string{"warm-up"})
		d.waitFinished(b, 1, 2*time.Minute)
		// One request at a time first: the latency of a single drop on an
		// otherwise idle daemon.
		var single []time.Duration
		for i := range 5 {
			name := fmt.Sprintf("single-%d", i)
			at := e.dropAll(b, []string{name})
			d.waitFinished(b, 1, 2*time.Minute)
			wt.mu.Lock()
			single = append(single, wt.jobAt[name].Sub(at[name]))
			wt.mu.Unlock()
		}
		// The peer, in the same run and on the same cluster: a bare
		// client-go client creating the same Jobs and Secrets at once.
		// Both bursts start on an idle cluster: the pods of the runs
		// before (the warm-up, the single drops) gone, so that neither
		// competes with the controllers' and kwok's work on them.
		e.waitIdle(b)
		bare := e.bareBurst(b, wt, n)
		e.waitIdle(b)
		counter.Reset()

		names := make([]string, n)
		for i := range names {
			names[i] = fmt.Sprintf("bench-%03d", i)
		}
		b.ResetTimer()
		dropAt := e.dropAll(b, names)
		d.waitFinished(b, n, 10*time.Minute)
		b.StopTimer()
		reads, mutations := counter.Reads(), counter.Mutations()
		wt.stop()

		var toJob, toResult []time.Duration
		wt.mu.Lock()
		for _, name := range names {
			if r := e.result(name); r.Status != "succeeded" {
				b.Fatalf("%s: %s %v", name, r.Status, deref(r.ErrorMessage))
			}
			jobAt, ok := wt.jobAt[name]
			if !ok {
				b.Fatalf("%s: its Job was never seen (%d of %d seen)", name, len(wt.jobAt), n)
			}
			toJob = append(toJob, jobAt.Sub(dropAt[name]))
			fi, err := os.Stat(filepath.Join(e.spool, name+".result.json"))
			if err != nil {
				b.Fatal(err)
			}
			done, ok := wt.podDone[name]
			if !ok {
				b.Fatalf("%s: its pod was never seen finished", name)
			}
			toResult = append(toResult, fi.ModTime().Sub(done))
		}
		wt.mu.Unlock()
		// The split between the daemon (reading, validating and queueing
		// the request) and the executor (Start: marker, Job, Secret).
		var toStarting, startToJob []time.Duration
		wt.mu.Lock()
		for _, name := range names {
			st := d.eventTime("starting", name)
			toStarting = append(toStarting, st.Sub(dropAt[name]))
			startToJob = append(startToJob, wt.jobAt[name].Sub(st))
		}
		wt.mu.Unlock()
		b.ReportMetric(ms(percentile(toStarting, 0.5)), "drop-to-start-call-p50-ms")
		b.ReportMetric(ms(percentile(startToJob, 0.5)), "start-call-to-job-p50-ms")
		b.ReportMetric(ms(percentile(single, 0.5)), "single-drop-to-job-p50-ms")
		b.ReportMetric(ms(percentile(toJob, 0.5)), "drop-to-job-p50-ms")
		b.ReportMetric(ms(percentile(toJob, 0.99)), "drop-to-job-p99-ms")
		b.ReportMetric(ms(percentile(bare, 0.5)), "bare-create-to-job-p50-ms")
		b.ReportMetric(ms(percentile(bare, 0.99)), "bare-create-to-job-p99-ms")
		b.ReportMetric(float64(percentile(toJob, 0.5))/float64(percentile(bare, 0.5)), "p50-ratio-to-bare")
		b.ReportMetric(float64(percentile(toJob, 0.99))/float64(percentile(bare, 0.99)), "p99-ratio-to-bare")
		b.ReportMetric(ms(percentile(toResult, 0.5)), "finished-to-result-p50-ms")
		b.ReportMetric(ms(percentile(toResult, 0.99)), "finished-to-result-p99-ms")
		b.Logf("\n%s", peerTable("200 run requests at once, request → Job visible to a watch", "pcsync daemon", "bare client-go",
			peerRow{"p50", percentile(toJob, 0.5), percentile(bare, 0.5)},
			peerRow{"p99", percentile(toJob, 0.99), percentile(bare, 0.99)}))
		b.ReportMetric(float64(reads+mutations)/n, "api-requests/run")
		b.ReportMetric(float64(mutations)/n, "api-mutations/run")
		b.ReportMetric(procStatusMiB(b, "VmHWM"), "peak-rss-MiB")
		d.stop(b)
	}
}

// peerRow is one line of peerTable: a figure of pcsync and of its peer.
type peerRow struct {
	what         string
	pcsync, peer time.Duration
}

// peerTable formats a benchmark's figures beside its peer's, with their
// ratio, for `make bench`.
func peerTable(scenario, us, them string, rows ...peerRow) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "%s\n", scenario)
	fmt.Fprintf(&sb, "  %-6s %16s %16s %8s\n", "", us, them, "ratio")
	for _, r := range rows {
		fmt.Fprintf(&sb, "  %-6s %13.0f ms %13.0f ms %7.2fx\n", r.what, ms(r.pcsync), ms(r.peer), float64(r.pcsync)/float64(r.peer))
	}
	return sb.String()
}

// bareManagedBy labels the peer's Jobs and Secrets instead of
// agentpod.ManagedByValue, so that the executor under test never sees them.
const bareManagedBy = "pcsync-bench-peer"

// bareBurst is the peer of BenchmarkKubeExecutor200: a bare client-go
// client (no QPS limit, one goroutine per run) creates n Jobs and their
// Secrets at once, each Job and Secret built by BuildJob and BuildSecret
// from a request like the benchmark's. It returns, per Job, the time from
// the common start to the Job's first appearance in wt's watch, then
// deletes the Jobs and waits until they are gone.
func (e *env) bareBurst(b *testing.B, wt *watchTimes, n int) []time.Duration {
	b.Helper()
	return e.bareBurstNamed(b, wt, n, "bare")
}

// bareBurstNamed is bareBurst with run ids prefix-000, prefix-001, ….
func (e *env) bareBurstNamed(b *testing.B, wt *watchTimes, n int, prefix string) []time.Duration {
	b.Helper()
	ctx := context.Background()
	cfg := e.c.RESTConfig()
	cfg.QPS, cfg.Burst, cfg.RateLimiter = -1, 0, nil
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	type pair struct {
		job *batchv1.Job
		sec *corev1.Secret
	}
	objs := make([]pair, n)
	ids := make([]string, n)
	environ := []string{"ANTHROPIC_API_KEY=" + testAPIKey, "PATH=/usr/bin"}
	for i := range objs {
		ids[i] = fmt.Sprintf("%s-%03d", prefix, i)
		file := filepath.Join(dir, ids[i]+".json")
		data := fmt.Sprintf(`{"apiVersion":"pcsync.io/v1alpha1","kind":"Run","company":%q,"agent":%q,"prompt":"benchmark run %s"}`, e.slug, agentName, ids[i])
		if err := os.WriteFile(file, []byte(data), 0o600); err != nil {
			b.Fatal(err)
		}
		r, err := runs.LoadRequest(e.model, file, 1<<20)
		if err != nil {
			b.Fatal(err)
		}
		in, err := NewInput(r, environ, DefaultBuildOptions())
		if err != nil {
			b.Fatal(err)
		}
		job, err := BuildJob(in, DefaultBuildOptions())
		if err != nil {
			b.Fatal(err)
		}
		sec, err := BuildSecret(in, job, DefaultBuildOptions())
		if err != nil {
			b.Fatal(err)
		}
		job.Labels[agentpod.LabelManagedBy] = bareManagedBy
		job.Spec.Template.Labels[agentpod.LabelManagedBy] = bareManagedBy
		sec.Labels[agentpod.LabelManagedBy] = bareManagedBy
		objs[i] = pair{job, sec}
	}
	gate := make(chan struct{})
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for _, o := range objs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-gate
			created, err := cs.BatchV1().Jobs(e.ns).Create(ctx, o.job, metav1.CreateOptions{})
			if err != nil {
				errs <- err
				return
			}
			o.sec.OwnerReferences[0].UID = created.UID
			if _, err := cs.CoreV1().Secrets(e.ns).Create(ctx, o.sec, metav1.CreateOptions{}); err != nil {
				errs <- err
			}
		}()
	}
	start := time.Now()
	close(gate)
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatalf("bare client: %v", err)
	}
	e.waitUntil("every Job of the bare client to be seen", func() bool {
		wt.mu.Lock()
		defer wt.mu.Unlock()
		for _, id := range ids {
			if _, ok := wt.jobAt[id]; !ok {
				return false
			}
		}
		return true
	})
	out := make([]time.Duration, 0, n)
	wt.mu.Lock()
	for _, id := range ids {
		out = append(out, wt.jobAt[id].Sub(start))
	}
	wt.mu.Unlock()
	bg := metav1.DeletePropagationBackground
	sel := metav1.ListOptions{LabelSelector: agentpod.LabelManagedBy + "=" + bareManagedBy}
	if err := cs.BatchV1().Jobs(e.ns).DeleteCollection(ctx, metav1.DeleteOptions{PropagationPolicy: &bg}, sel); err != nil {
		b.Fatal(err)
	}
	// Every caller starts the peer on an idle cluster: gone means idle again.
	e.waitIdle(b)
	return out
}

// roomForPods raises the fake node's capacity (110 pods, 32 CPUs by
// default) to n of the benchmark's pods, and puts it back afterwards. kwok
// manages only that node, and keeps the capacity it is given.
func (e *env) roomForPods(b *testing.B, n int) {
	b.Helper()
	ctx := context.Background()
	name := e.c.NodeName()
	set := func(rl corev1.ResourceList) error {
		node, err := e.cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for k, v := range rl {
			node.Status.Capacity[k] = v
			node.Status.Allocatable[k] = v
		}
		_, err = e.cs.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{})
		return err
	}
	node, err := e.cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		b.Fatal(err)
	}
	old := node.Status.Allocatable.DeepCopy()
	room := corev1.ResourceList{
		corev1.ResourcePods:   *resource.NewQuantity(int64(n), resource.DecimalSI),
		corev1.ResourceCPU:    *resource.NewMilliQuantity(int64(n)*100, resource.DecimalSI),
		corev1.ResourceMemory: *resource.NewQuantity(int64(n)*128<<20, resource.BinarySI),
	}
	if err := set(room); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := set(old); err != nil {
			b.Logf("node %s: cannot restore its capacity: %v", name, err)
		}
	})
}

// BenchmarkKubeExecutorInFlight1000 runs the real `pcsync daemon --executor
// kubernetes` (built from ./cmd/pcsync) as its own process, drops 1,000
// requests whose pods keep running, and reports the daemon process's RSS
// once every run's log is being followed (each run has its Job, its pod
// watched and an open log stream), with its goroutines and Go heap from its
// /metrics.
func BenchmarkKubeExecutorInFlight1000(b *testing.B) {
	const n = 1000
	lines := transcript(b, claudeTranscript)[:2]
	want := strings.Join(lines, "\n") + "\n"
	bin := filepath.Join(b.TempDir(), "pcsync")
	build := exec.Command("go", "build", "-o", bin, "github.com/pcsync/pcsync/cmd/pcsync")
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("go build ./cmd/pcsync: %v\n%s", err, out)
	}
	for range b.N {
		e := newEnv(b, benchOptions(n, testcluster.RunForever(), lines))
		e.roomForPods(b, n+100)
		addr := freeAddr(b)
		logf, err := os.Create(filepath.Join(b.TempDir(), "daemon.log"))
		if err != nil {
			b.Fatal(err)
		}
		cmd := exec.Command(bin, "daemon", "--executor", "kubernetes", "--config", e.cfgDir, "--spool", e.spool,
			"--state-dir", e.state, "--kubeconfig", e.c.KubeconfigPath(), "--metrics-bind-address", addr, "--log-level", "warn",
			"--skip-network-check", "--profiling")
		cmd.Stdout, cmd.Stderr = logf, logf
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		stopped := false
		stop := func() {
			if !stopped {
				stopped = true
				_ = cmd.Process.Signal(syscall.SIGTERM)
				_ = cmd.Wait()
			}
		}
		b.Cleanup(stop)
		e.waitUntil("the daemon to serve /metrics", func() bool { _, err := metricsText(addr); return err == nil })
		names := make([]string, n)
		for i := range names {
			names[i] = fmt.Sprintf("fly-%04d", i)
		}
		b.ResetTimer()
		e.dropAll(b, names)
		deadline := time.Now().Add(15 * time.Minute)
		for _, name := range names {
			for {
				data, _ := os.ReadFile(filepath.Join(e.spool, name+".log"))
				if string(data) == want {
					break
				}
				if r, err := result.Read(filepath.Join(e.spool, name+result.Suffix)); err == nil {
					b.Fatalf("%s ended: %s %s %s", name, r.Status, deref(r.ErrorCode), deref(r.ErrorMessage))
				}
				if time.Now().After(deadline) {
					b.Fatalf("%s: its log was not followed within 15 minutes (has %q)", name, data)
				}
				time.Sleep(100 * time.Millisecond)
			}
		}
		b.StopTimer()
		status := fmt.Sprintf("/proc/%d/status", cmd.Process.Pid)
		b.ReportMetric(procStatusMiBOf(b, status, "VmRSS"), "rss-MiB")
		b.ReportMetric(procStatusMiBOf(b, status, "VmHWM"), "peak-rss-MiB")
		b.ReportMetric(procStatusMiBOf(b, status, "RssFile"), "rss-file-MiB")
		text, err := metricsText(addr)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(metricValue(b, text, "go_goroutines"), "goroutines")
		b.ReportMetric(metricValue(b, text, "go_memstats_heap_inuse_bytes")/(1<<20), "heap-inuse-MiB")
		b.ReportMetric(metricValue(b, text, "go_memstats_stack_inuse_bytes")/(1<<20), "stacks-MiB")
		saveHeapProfile(b, addr)
		stop()
	}
}

// saveHeapProfile writes the daemon's heap profile, taken after a
// collection (what is live, not what waits to be collected), into
// $PCSYNC_BENCH_PROFILE_DIR, when set, for `go tool pprof`.
func saveHeapProfile(b *testing.B, addr string) {
	b.Helper()
	dir := os.Getenv("PCSYNC_BENCH_PROFILE_DIR")
	if dir == "" {
		return
	}
	resp, err := http.Get("http://" + addr + "/debug/pprof/heap?gc=1")
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	path := filepath.Join(dir, fmt.Sprintf("daemon-heap-%d.pprof", time.Now().Unix()))
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		b.Fatal(err)
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
	b.Logf("the daemon's heap profile: %s", path)
}

// freeAddr returns a free 127.0.0.1 address.
func freeAddr(b *testing.B) string {
	b.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func metricsText(addr string) (string, error) {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("/metrics: %s", resp.Status)
	}
	return string(data), nil
}

// metricValue reads an unlabelled sample from Prometheus text.
func metricValue(b *testing.B, text, name string) float64 {
	b.Helper()
	for _, line := range strings.Split(text, "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				b.Fatal(err)
			}
			return f
		}
	}
	b.Fatalf("/metrics has no %s", name)
	return 0
}
