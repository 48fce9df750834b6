//go:build integration

package paperclip

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pcsync/pcsync/pkg/sandbox/pool"
)

// TestSandboxWarmPoolRun: a company whose Git config declares a warm pool
// of one claude_local pod (kwok lease pods, executes on this host through
// --sandbox-host-root). Before any run the member is there, Ready, with no
// role label, no run's env and no secret; a stock claude_local run through the real
// Paperclip claims it (the daemon counts one warm claim, no miss) and
// succeeds with the transcript's figures; after the run that pod is gone
// and the pool is whole again with a new member. The run is woken only once
// the daemon itself reports the member Ready: its claim reads its own
// informer, which sees the API server's Ready a little later.
func TestSandboxWarmPoolRun(t *testing.T) {
	srv := sharedServer(t)
	tr := readTranscript(t, "claude-obers-small-success.jsonl")
	metrics := freeAddr(t)
	sw := newSandboxWorld(t, srv, sandboxOptions{
		DaemonArgs: []string{"--metrics-bind-address", metrics},
		Company:    map[string]any{"sandbox": map[string]any{"warmPool": []any{map[string]any{"adapterType": "claude_local", "count": 1}}}},
	})
	first := sw.waitMember(t, "")
	sw.waitDaemonSeesReady(t, metrics, time.Minute)
	if role, ok := first.Labels["paperclip.io/role"]; ok {
		t.Errorf("member %s has role %q: an egress policy selects it before a claim", first.Name, role)
	}
	// A member's env is the pod's own (HOME, TMPDIR): nothing of a run, no
	// secret reference; each execute brings its env over the stream.
	for _, c := range append(first.Spec.InitContainers, first.Spec.Containers...) {
		if len(c.EnvFrom) > 0 {
			t.Errorf("member %s container %s takes env from %v", first.Name, c.Name, c.EnvFrom)
		}
		for _, e := range c.Env {
			if e.ValueFrom != nil || strings.HasPrefix(e.Name, "PAPERCLIP_") || strings.HasPrefix(e.Name, "STANDIN_") {
				t.Errorf("member %s container %s has a run's env or a secret: %s", first.Name, c.Name, e.Name)
			}
		}
	}

	coder := sw.sandboxAgent(t, "Coder", "claude_local", tr, nil, nil)
	runAndCheck(t, srv, coder.ID, "e2e: sandbox from a warm pool", runCheck{Within: 3 * time.Minute, Figures: stockFigures(t, tr), Transcript: tr,
		Log: sw.daemon.out.String})
	claims := map[string]float64{}
	for _, o := range []string{"warm", "miss", "cold"} {
		claims[o] = metricSum(t, metrics, `pcsync_sandbox_pool_claims_total{company="`+sw.pc.Slug+`",outcome="`+o+`"}`)
	}
	if diff := cmp.Diff(map[string]float64{"warm": 1, "miss": 0, "cold": 0}, claims); diff != "" {
		t.Errorf("the daemon's claims of the run's lease (-want +got):\n%s", diff)
	}
	// The claimed member ran the run, and is gone after it; a new member
	// takes its place.
	sw.mu.Lock()
	claimed := sw.pods[first.Name]
	sw.mu.Unlock()
	if claimed == nil || claimed.Labels["paperclip.io/role"] != "agent" || claimed.Labels[pool.Label] != "" {
		t.Errorf("member %s was not claimed as the lease's pod: %v", first.Name, claimed)
	}
	second := sw.waitMember(t, first.Name)
	deadline := time.Now().Add(time.Minute)
	for {
		sw.mu.Lock()
		_, gone := sw.podGone[first.Name]
		sw.mu.Unlock()
		if gone {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the claimed member %s is still there a minute after its run", first.Name)
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("member %s ran the run; %s took its place", first.Name, second.Name)
}

// waitMember waits for a Ready warm pool member of the world's namespace
// other than not, and returns it.
func (sw *sandboxWorld) waitMember(t testing.TB, not string) corev1.Pod {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		l, err := sw.c.Client().CoreV1().Pods(sw.ns).List(context.Background(), metav1.ListOptions{LabelSelector: pool.Label})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range l.Items {
			if p.Name != not && p.DeletionTimestamp == nil && podIsReady(&p) {
				return p
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no Ready warm pool member in %s after 2m (%d pods with the pool label)\ndaemon log:\n%s", sw.ns, len(l.Items), tail(sw.daemon.out.String(), 4000))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// waitDaemonSeesReady waits until the daemon serving metrics at addr
// reports a Ready member of the world's company's pools
// (pcsync_sandbox_pool_ready, from the informer its claims read).
func (sw *sandboxWorld) waitDaemonSeesReady(t testing.TB, addr string, within time.Duration) {
	t.Helper()
	series := `pcsync_sandbox_pool_ready{company="` + sw.pc.Slug + `"}`
	deadline := time.Now().Add(within)
	for metricSum(t, addr, series) < 1 {
		if time.Now().After(deadline) {
			t.Fatalf("the daemon reports no Ready warm pool member (%s) after %s\ndaemon log:\n%s", series, within, tail(sw.daemon.out.String(), 4000))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// podIsReady says p runs and is Ready.
func podIsReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return p.Status.Phase == corev1.PodRunning && c.Status == corev1.ConditionTrue
		}
	}
	return false
}
