//go:build integration

package kubeexec

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pcsync/pcsync/internal/lib/kube"
	"github.com/pcsync/pcsync/internal/testing/testcluster"
	"github.com/pcsync/pcsync/pkg/result"
)

// daemonProcess is the real `pcsync daemon` binary running on the env.
type daemonProcess struct {
	cmd     *exec.Cmd
	addr    string
	logPath string
}

// startDaemonProcess starts `pcsync daemon --executor kubernetes
// --no-reconcile` on the env's config, spool and state, and returns once
// its runs loop serves the spool (/readyz condition RunsServed).
func (e *env) startDaemonProcess(b *testing.B, bin string, extra ...string) *daemonProcess {
	b.Helper()
	d := &daemonProcess{addr: freeAddr(b), logPath: filepath.Join(b.TempDir(), "daemon.log")}
	logf, err := os.Create(d.logPath)
	if err != nil {
		b.Fatal(err)
	}
	args := append([]string{"daemon", "--executor", "kubernetes", "--no-reconcile", "--config", e.cfgDir,
		"--spool", e.spool, "--state-dir", e.state, "--kubeconfig", e.c.KubeconfigPath(),
		"--metrics-bind-address", d.addr, "--log-format", "json", "--skip-network-check"}, extra...)
	d.cmd = exec.Command(bin, args...)
	d.cmd.Stdout, d.cmd.Stderr = logf, logf
	d.cmd.Env = append(os.Environ(), "ANTHROPIC_API_KEY="+testAPIKey)
	if err := d.cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(d.stop)
	e.waitUntil("the daemon to serve the spool", func() bool {
		resp, err := http.Get("http://" + d.addr + "/readyz")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return strings.Contains(string(body), `"Serving"`)
	})
	return d
}

// stop ends the daemon with SIGTERM (its runs go on) and waits for it.
func (d *daemonProcess) stop() {
	if d.cmd.ProcessState != nil {
		return
	}
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	_ = d.cmd.Wait()
}

// logTimes returns, per run, the time of the first daemon log record with
// that message (e.g. "run queued", "Job created").
func (d *daemonProcess) logTimes(b *testing.B, msg string) map[string]time.Time {
	b.Helper()
	f, err := os.Open(d.logPath)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	out := map[string]time.Time{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.Contains(line, `"msg":"`+msg+`"`) {
			continue
		}
		at, run := jsonField(line, "time"), jsonField(line, "name")
		t, err := time.Parse(time.RFC3339Nano, at)
		if err != nil || run == "" {
			continue
		}
		if _, ok := out[run]; !ok {
			out[run] = t
		}
	}
	return out
}

// jsonField cuts the string value of a top-level key out of a JSON log line.
func jsonField(line, key string) string {
	_, rest, ok := strings.Cut(line, `"`+key+`":"`)
	if !ok {
		return ""
	}
	v, _, _ := strings.Cut(rest, `"`)
	return v
}

// waitIdle waits until the env's namespace has no Job and no pod left, so
// that each round of a benchmark starts on an idle cluster. The finished
// Jobs pcsync keeps for their ttlSecondsAfterFinished are deleted here.
func (e *env) waitIdle(b *testing.B) {
	b.Helper()
	ctx := context.Background()
	bg := metav1.DeletePropagationBackground
	e.waitUntil("the namespace to hold no Job and no pod", func() bool {
		jobs, err := e.cs.BatchV1().Jobs(e.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false
		}
		for _, j := range jobs.Items {
			if j.DeletionTimestamp == nil && jobFinished(&j) {
				if err := e.cs.BatchV1().Jobs(e.ns).Delete(ctx, j.Name, metav1.DeleteOptions{PropagationPolicy: &bg}); err != nil && !isNotFound(err) {
					b.Fatal(err)
				}
			}
		}
		if len(jobs.Items) > 0 {
			return false
		}
		pods, err := e.cs.CoreV1().Pods(e.ns).List(ctx, metav1.ListOptions{})
		return err == nil && len(pods.Items) == 0
	})
}

// daemonBurst is one pcsync round of BenchmarkBurstAsUsersSeeIt: a fresh
// daemon process; n requests renamed into the spool at once; per request,
// the time from its rename to its Job's first sight by wt's watch (toJob)
// and to the daemon's "run queued" record (toQueued: the request read,
// validated and queued). It waits for every result (the runs succeed, and
// the daemon deletes their Jobs) and stops the daemon.
func (e *env) daemonBurst(b *testing.B, bin string, wt *watchTimes, n int, prefix string) (toJob, toQueued []time.Duration) {
	b.Helper()
	d := e.startDaemonProcess(b, bin)
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("%s-%03d", prefix, i)
	}
	at := e.dropAll(b, names)
	e.waitUntil("every Job of the round to be seen", func() bool {
		wt.mu.Lock()
		defer wt.mu.Unlock()
		for _, name := range names {
			if _, ok := wt.jobAt[name]; !ok {
				return false
			}
		}
		return true
	})
	wt.mu.Lock()
	for _, name := range names {
		toJob = append(toJob, wt.jobAt[name].Sub(at[name]))
	}
	wt.mu.Unlock()
	// The runs end 1 s after their pods run; on a loaded machine the last
	// results of a round can take minutes.
	for deadline := time.Now().Add(10 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
		missing := 0
		for _, name := range names {
			if _, err := os.Stat(filepath.Join(e.spool, name+result.Suffix)); err != nil {
				missing++
			}
		}
		if missing == 0 {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d results of round %s missing after 10 minutes", missing, prefix)
		}
	}
	for _, name := range names {
		if r := e.result(name); r.Status != result.StatusSucceeded {
			b.Fatalf("%s: %s %s", name, r.Status, deref(r.ErrorMessage))
		}
	}
	d.stop()
	if dir := os.Getenv("PCSYNC_BURST_LOG_DIR"); dir != "" {
		data, _ := os.ReadFile(d.logPath)
		_ = os.WriteFile(filepath.Join(dir, prefix+".log"), data, 0o644)
	}
	queued := d.logTimes(b, "run queued")
	for _, name := range names {
		if t, ok := queued[name]; ok {
			toQueued = append(toQueued, t.Sub(at[name]))
		}
	}
	return toJob, toQueued
}

// BenchmarkBurstAsUsersSeeIt is issue 23's protocol, the burst as a user
// sees it: one company whose quota allows 5,000 pods, one agent of
// concurrency 1,000, and eight rounds on an idle cluster, in the order peer,
// pcsync, pcsync, peer, pcsync, peer, peer, pcsync:
//   - peer: a bare client-go client (no QPS limit, one goroutine per run)
//     creates 200 Jobs and their Secrets at once; the time from the common
//     start to each Job's first sight by a watch;
//   - pcsync: the real binary, `pcsync daemon --executor kubernetes
//     --no-reconcile`, started and serving; 200 requests renamed into the
//     spool at once; the time from each rename to its Job's first sight by
//     the same watch, and (pcsync's admission, which the peer does not do)
//     to the daemon's "run queued" log record.
//
// Each round waits until the previous one's Jobs and pods are gone. It
// prints the rounds' p50 and p99 and pcsync's ratio to the peer (pooled
// rounds of each), and reports them as metrics.
func BenchmarkBurstAsUsersSeeIt(b *testing.B) {
	const n = 200
	bin := buildPcsync(b)
	lines := transcript(b, claudeTranscript)
	for range b.N {
		e := newEnv(b, benchOptions(1000, testcluster.SucceedAfter(time.Second), lines))
		e.roomForPods(b, n+100)
		wt := e.watchRuns(b)
		var peer, ours, admitted []time.Duration
		var table strings.Builder
		fmt.Fprintf(&table, "%d runs at once on an idle cluster, start → Job seen by a watch\n", n)
		fmt.Fprintf(&table, "  %-22s %10s %10s\n", "round", "p50", "p99")
		// Two ABBA blocks: the machine's load drifts, and each side meets it
		// as often early as late.
		for round, who := range []string{"peer", "pcsync", "pcsync", "peer", "pcsync", "peer", "peer", "pcsync"} {
			e.waitIdle(b)
			var ds []time.Duration
			var extra string
			if who == "peer" {
				ds = e.bareBurstNamed(b, wt, n, fmt.Sprintf("bare%d", round))
				peer = append(peer, ds...)
			} else {
				var toQueued []time.Duration
				ds, toQueued = e.daemonBurst(b, bin, wt, n, fmt.Sprintf("r%d", round))
				ours, admitted = append(ours, ds...), append(admitted, toQueued...)
				extra = fmt.Sprintf("  (rename → run queued %.0f ms / %.0f ms)", ms(percentile(toQueued, 0.5)), ms(percentile(toQueued, 0.99)))
			}
			fmt.Fprintf(&table, "  %-22s %7.0f ms %7.0f ms%s  (load %s)\n", fmt.Sprintf("%d: %s", round+1, who),
				ms(percentile(ds, 0.5)), ms(percentile(ds, 0.99)), extra, loadAverage())
		}
		wt.stop()
		p50, p99 := float64(percentile(ours, 0.5))/float64(percentile(peer, 0.5)),
			float64(percentile(ours, 0.99))/float64(percentile(peer, 0.99))
		fmt.Fprintf(&table, "  pcsync / peer: p50 %.2f×, p99 %.2f×\n", p50, p99)
		b.Logf("\n%s", table.String())
		b.ReportMetric(ms(percentile(ours, 0.5)), "pcsync-p50-ms")
		b.ReportMetric(ms(percentile(ours, 0.99)), "pcsync-p99-ms")
		b.ReportMetric(ms(percentile(admitted, 0.5)), "pcsync-queued-p50-ms")
		b.ReportMetric(ms(percentile(admitted, 0.99)), "pcsync-queued-p99-ms")
		b.ReportMetric(ms(percentile(peer, 0.5)), "peer-p50-ms")
		b.ReportMetric(ms(percentile(peer, 0.99)), "peer-p99-ms")
		b.ReportMetric(p50, "p50-ratio")
		b.ReportMetric(p99, "p99-ratio")
	}
}

// windowRecorder is a WindowMetrics that keeps the smallest limit and the
// cuts.
type windowRecorder struct {
	mu       sync.Mutex
	min, now int
	cuts     int
}

func (w *windowRecorder) SetStartWindow(limit int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.now = limit
	if w.min == 0 || limit < w.min {
		w.min = limit
	}
}

func (w *windowRecorder) StartWindowCut() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.cuts++
}

// actingUser makes user (not in system:masters, so the API server's
// max-in-flight filter applies to it) a cluster-admin, until b ends.
func (e *env) actingUser(b *testing.B, user string) {
	b.Helper()
	ctx := context.Background()
	crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: user},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects: []rbacv1.Subject{{Kind: "User", APIGroup: "rbac.authorization.k8s.io", Name: user}}}
	if _, err := e.cs.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = e.cs.RbacV1().ClusterRoleBindings().Delete(ctx, user, metav1.DeleteOptions{}) })
	e.impersonate = user
}

// BenchmarkBurst2000UnderPushback: 2,000 requests at once on a control
// plane of its own whose API server takes at most 20 mutating requests at a
// time (--max-mutating-requests-inflight) and answers 429 past that, as a
// busy production server does; the daemon's client acts as a user that the
// limit applies to (not system:masters). The start window must shrink (pcsync_start_window),
// the API server must not answer 5xx, every run must end succeeded, and
// the requests per run stay at 5 when the 429s client-go retries are left
// out. It reports the window's smallest limit and cuts, the 429s and 5xx
// answers (from the audit log) and the requests per run.
func BenchmarkBurst2000UnderPushback(b *testing.B) {
	const n = 2000
	lines := transcript(b, claudeTranscript)
	ctx := context.Background()
	co := testcluster.DefaultOptions()
	co.NodePods = n + 100
	co.ExtraAPIServerArgs = []string{"--max-mutating-requests-inflight=20"}
	co.Logf = b.Logf
	c, err := testcluster.Start(ctx, co)
	if err != nil {
		b.Fatal(err)
	}
	// Registered first, so it runs after the env's own clean-ups.
	b.Cleanup(func() { _ = c.Close() })
	for range b.N {
		o := benchOptions(n, testcluster.SucceedAfter(time.Second), lines)
		o.Cluster = c
		e := newEnv(b, o)
		e.roomForPods(b, n+100)
		e.actingUser(b, "pcsync-bench-"+e.slug)
		counter := &kube.RequestCounter{}
		win := &windowRecorder{}
		d := e.startDaemonWith(false, counter, func(o *Options) {
			quiet(o)
			o.WindowMetrics = win
		})
		counter.Reset()
		names := make([]string, n)
		for i := range names {
			names[i] = fmt.Sprintf("flood-%04d", i)
		}
		began := time.Now()
		b.ResetTimer()
		e.dropAll(b, names)
		d.waitFinished(b, n, 20*time.Minute)
		b.StopTimer()
		took := time.Since(began)
		reads, mutations, refused := counter.Reads(), counter.Mutations(), counter.TooMany()
		for _, name := range names {
			if r := e.result(name); r.Status != result.StatusSucceeded {
				b.Fatalf("%s: %s %s", name, r.Status, deref(r.ErrorMessage))
			}
		}
		evs, err := e.c.AuditEvents(func(a testcluster.AuditEvent) bool {
			return a.ObjectRef != nil && a.ObjectRef.Namespace == e.ns && a.ResponseStatus != nil &&
				(a.ResponseStatus.Code == 429 || a.ResponseStatus.Code >= 500) && a.RequestReceivedTimestamp.After(began)
		})
		if err != nil {
			b.Fatal(err)
		}
		var tooMany, fivexx int
		for _, ev := range evs {
			if ev.ResponseStatus.Code == 429 {
				tooMany++
			} else {
				fivexx++
			}
		}
		win.mu.Lock()
		minLimit, cuts := win.min, win.cuts
		win.mu.Unlock()
		b.Logf("2,000 runs at once, API server at 20 mutating requests in flight: %s in all; window min %d, %d cuts; "+
			"the daemon's client got %d answers 429 (the audit log: %d mutating requests answered 429), %d 5xx; "+
			"%.2f requests per run answered (%.2f with the 429s client-go sent again)",
			took.Round(time.Second), minLimit, cuts, refused, tooMany, fivexx, float64(reads+mutations-refused)/n, float64(reads+mutations)/n)
		if cuts == 0 || fivexx > 0 {
			b.Errorf("want the window cut and no 5xx: %d cuts, %d 5xx", cuts, fivexx)
		}
		b.ReportMetric(float64(minLimit), "window-min")
		b.ReportMetric(float64(cuts), "window-cuts")
		b.ReportMetric(float64(refused), "answers-429")
		b.ReportMetric(float64(fivexx), "answers-5xx")
		b.ReportMetric(float64(reads+mutations-refused)/n, "api-requests/run")
		b.ReportMetric(took.Seconds(), "burst-s")
		d.stop(b)
	}
}

// loadAverage is the machine's 1-minute load average, or "?".
func loadAverage() string {
	data, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(data)); err == nil && len(f) > 0 {
		return f[0]
	}
	return "?"
}
