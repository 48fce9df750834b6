//go:build integration

package realnode

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"

	"github.com/pcsync/pcsync/internal/testing/testcluster"
	"github.com/pcsync/pcsync/pkg/images"
	"github.com/pcsync/pcsync/pkg/sandbox"
)

// samples is how many times each figure is measured; the benchmarks report
// the median (p50) of pcsync's path and of its peer, side by side.
const samples = 7

func p50(ds []time.Duration) float64 {
	s := slices.Clone(ds)
	slices.Sort(s)
	return float64(s[len(s)/2].Microseconds()) / 1000
}

// report prints pcsync's and its peer's p50 and their ratio, as a
// sub-benchmark of its own named name, so that each figure is a line of
// go test -bench.
func report(b *testing.B, name, what string, ours, peer []time.Duration) {
	b.Helper()
	b.Run(name, func(b *testing.B) { reportOne(b, what, ours, peer) })
}

func reportOne(b *testing.B, what string, ours, peer []time.Duration) {
	b.Helper()
	o := p50(ours)
	b.ReportMetric(o, "pcsync-p50-ms")
	if len(peer) == 0 {
		b.Logf("%s: pcsync p50 %.1f ms (%d samples; load %s)", what, o, len(ours), loadavg())
		return
	}
	p := p50(peer)
	b.ReportMetric(p, "peer-p50-ms")
	b.ReportMetric(o/p, "ratio")
	b.Logf("%s: pcsync p50 %.1f ms, peer p50 %.1f ms, ratio %.2f (%d samples each; load %s)", what, o, p, o/p, len(ours), loadavg())
}

func loadavg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// plainPod is a pod of image on the real node, hardened like pcsync's, whose
// PID 1 is command.
func plainPod(node *testcluster.RealNode, ns, name, image string, command ...string) *corev1.Pod {
	no, yes, uid := false, true, int64(1000)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PodSpec{
			AutomountServiceAccountToken: &no, RestartPolicy: corev1.RestartPolicyNever,
			SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: &yes, RunAsUser: &uid, RunAsGroup: &uid,
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
			Containers: []corev1.Container{{Name: "main", Image: image, Command: command,
				ImagePullPolicy: corev1.PullIfNotPresent,
				SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: &no, ReadOnlyRootFilesystem: &yes,
					Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}}},
		},
	}
	node.Pin(&pod.Spec)
	return pod
}

// waitPodState waits for the watch to show the pod's phase Running, or its
// deletion when gone is set.
func waitPodState(ctx context.Context, b testing.TB, c *testcluster.Cluster, ns, name string, gone bool) {
	b.Helper()
	w, err := c.Client().CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Stop()
	for ev := range w.ResultChan() {
		pod, ok := ev.Object.(*corev1.Pod)
		if !ok {
			continue
		}
		if gone && ev.Type == watch.Deleted || !gone && pod.Status.Phase == corev1.PodRunning {
			return
		}
	}
	b.Fatalf("watch of pod %s/%s ended", ns, name)
}

// BenchmarkLease: acquire → ready against a plain pod of the same image
// create → Running; one execute of `true` against a bare client-go exec of
// it; release → pod gone against a bare delete of a plain pod whose PID 1
// handles SIGTERM (pcsync init), with no volume and with one emptyDir (the
// lease pod has four). Each create, release and delete waits a random
// part of the kubelet's relist period first (relistJitter), so that none
// of them meets the relist at the same point each time.
func BenchmarkLease(b *testing.B) {
	p := pushImages(b)
	e := newLeaseEnv(b, p)
	c, node := e.c, e.c.RealNode()
	image := images.Ref(p.Registry, images.Agent("claude"), imageTag)
	ctx := context.Background()
	for range b.N {
		var acquire, plain, execs, bare, release, del, delEmptyDir []time.Duration
		for i := range samples {
			name := fmt.Sprintf("plain-%d-%d", time.Now().UnixNano()%1e6, i)
			pod := plainPod(node, e.ns, name, image, images.ServerPath, "init", "--", "sleep", "3600")
			withDir := plainPod(node, e.ns, name+"-dir", image, images.ServerPath, "init", "--", "sleep", "3600")
			withScratch(&withDir.Spec)
			if _, err := c.Client().CoreV1().Pods(e.ns).Create(ctx, withDir, metav1.CreateOptions{}); err != nil {
				b.Fatal(err)
			}
			relistJitter()
			begin := time.Now()
			if _, err := c.Client().CoreV1().Pods(e.ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
				b.Fatal(err)
			}
			waitPodState(ctx, b, c, e.ns, name, false)
			plain = append(plain, time.Since(begin))

			relistJitter()
			begin = time.Now()
			info, err := e.m.Acquire(ctx, sandbox.AcquireParams{Config: sandbox.EnvironmentConfig{Company: e.slug}, AdapterType: "claude_local", AgentID: pinnedAgentID})
			if err != nil {
				b.Fatal(err)
			}
			acquire = append(acquire, time.Since(begin))

			for range 5 {
				begin = time.Now()
				if r := e.exec(b, info.ID, sandbox.ExecParams{Command: "true"}); code(r) != 0 {
					b.Fatalf("true: exit %d", code(r))
				}
				execs = append(execs, time.Since(begin))
				begin = time.Now()
				bareExec(ctx, b, c, e.ns, name, "main", "true")
				bare = append(bare, time.Since(begin))
			}

			// A lease as old as a short run's: the kubelet's pod worker
			// has seen a relist since its pod's last sync (see docs).
			time.Sleep(time.Second)
			relistJitter()
			begin = time.Now()
			if _, err := e.m.Release(ctx, sandbox.ReleaseParams{ID: info.ID}); err != nil {
				b.Fatal(err)
			}
			release = append(release, time.Since(begin))
			del = append(del, bareDelete(ctx, b, c, e.ns, name))
			delEmptyDir = append(delEmptyDir, bareDelete(ctx, b, c, e.ns, withDir.Name))
		}
		report(b, "acquire", "lease acquire → ready vs plain pod create → Running", acquire, plain)
		report(b, "execute", "execute true vs bare client-go exec", execs, bare)
		report(b, "release", "release → pod gone vs bare delete of a plain pod (PID 1 handles SIGTERM)", release, del)
		report(b, "release-emptydir", "release → pod gone vs bare delete of a plain pod with one emptyDir", release, delEmptyDir)
	}
}

// withScratch mounts one emptyDir, /scratch, in spec's first container.
func withScratch(spec *corev1.PodSpec) {
	spec.Volumes = []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "scratch", MountPath: "/scratch"}}
}

// bareDelete deletes pod ns/name after relistJitter and returns how long
// it took until the watch saw it gone.
func bareDelete(ctx context.Context, b *testing.B, c *testcluster.Cluster, ns, name string) time.Duration {
	b.Helper()
	var wg sync.WaitGroup
	wg.Go(func() { waitPodState(ctx, b, c, ns, name, true) })
	time.Sleep(20 * time.Millisecond) // the watch is open
	relistJitter()
	begin := time.Now()
	if err := c.Client().CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		b.Fatal(err)
	}
	wg.Wait()
	return time.Since(begin)
}

// bareExec runs argv in the pod over one client-go WebSocket exec.
func bareExec(ctx context.Context, b testing.TB, c *testcluster.Cluster, ns, pod, container string, argv ...string) {
	b.Helper()
	req := c.Client().CoreV1().RESTClient().Post().Resource("pods").Namespace(ns).Name(pod).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Container: container, Command: argv, Stdout: true, Stderr: true}, scheme.ParameterCodec)
	ex, err := remotecommand.NewWebSocketExecutor(c.RESTConfig(), "GET", req.URL().String())
	if err != nil {
		b.Fatal(err)
	}
	var out strings.Builder
	if err := ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &out, Stderr: &out}); err != nil {
		b.Fatalf("exec %v: %v (%s)", argv, err, out.String())
	}
}

// runningPods records when each pod of the namespace was first seen, first
// seen bound to a node, and first seen Running, by its labels.
type runningPods struct {
	mu    sync.Mutex
	pods  []*podTimes
	byUID map[string]*podTimes
}

// podTimes is one pod's timeline as the watch saw it.
type podTimes struct {
	pod                       *corev1.Pod
	added, scheduled, running time.Time
	// ended is when a container of the pod was first seen terminated.
	ended time.Time
}

func podsRunning(b testing.TB, c *testcluster.Cluster, ns string) *runningPods {
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	w, err := c.Client().CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	r := &runningPods{byUID: map[string]*podTimes{}}
	go func() {
		defer w.Stop()
		for ev := range w.ResultChan() {
			pod, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			now := time.Now()
			r.mu.Lock()
			pt := r.byUID[string(pod.UID)]
			if pt == nil {
				pt = &podTimes{pod: pod, added: now}
				r.byUID[string(pod.UID)] = pt
				r.pods = append(r.pods, pt)
			}
			if pt.scheduled.IsZero() && pod.Spec.NodeName != "" {
				pt.scheduled = now
			}
			if pt.running.IsZero() && pod.Status.Phase == corev1.PodRunning {
				pt.running = now
			}
			for _, cs := range pod.Status.ContainerStatuses {
				if pt.ended.IsZero() && cs.State.Terminated != nil {
					pt.ended = now
				}
			}
			r.mu.Unlock()
		}
	}()
	return r
}

// wait returns the timeline of the pod labelled key=value once it was seen
// Running.
func (r *runningPods) wait(b testing.TB, key, value string) podTimes {
	return r.waitFor(b, key, value, func(p *podTimes) bool { return !p.running.IsZero() })
}

// waitEnded returns the timeline of the pod labelled key=value once a
// container of it was seen terminated.
func (r *runningPods) waitEnded(b testing.TB, key, value string) podTimes {
	return r.waitFor(b, key, value, func(p *podTimes) bool { return !p.ended.IsZero() })
}

func (r *runningPods) waitFor(b testing.TB, key, value string, ok func(*podTimes) bool) podTimes {
	b.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for time.Now().Before(deadline) {
		r.mu.Lock()
		for _, p := range r.pods {
			if p.pod.Labels[key] == value && ok(p) {
				pt := *p
				r.mu.Unlock()
				return pt
			}
		}
		r.mu.Unlock()
		time.Sleep(5 * time.Millisecond)
	}
	b.Fatalf("no pod %s=%s as awaited after 3 minutes", key, value)
	return podTimes{}
}

// phases splits begin → Running into begin → the pod exists, → bound to the
// node, → Running.
type phases struct{ created, bound, started []time.Duration }

func (p *phases) add(begin time.Time, pt podTimes) {
	p.created = append(p.created, pt.added.Sub(begin))
	p.bound = append(p.bound, pt.scheduled.Sub(pt.added))
	p.started = append(p.started, pt.running.Sub(pt.scheduled))
}

func (p *phases) String() string {
	return fmt.Sprintf("to the pod's creation %.0f ms, to its binding %.0f ms, to Running %.0f ms", p50(p.created), p50(p.bound), p50(p.started))
}
