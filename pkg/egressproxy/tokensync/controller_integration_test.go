//go:build integration

package tokensync

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/pcsync/pcsync/internal/lib/agentpod"
	"github.com/pcsync/pcsync/internal/testing/testcluster"
	"github.com/pcsync/pcsync/pkg/egressproxy/inject"
	"github.com/pcsync/pcsync/pkg/egressproxy/spend"
)

func TestMain(m *testing.M) { os.Exit(testcluster.Main(m)) }

func createPod(ctx context.Context, t *testing.T, cs kubernetes.Interface, ns, name, role string, ann map[string]string) {
	t.Helper()
	labels := map[string]string{agentpod.LabelManagedBy: agentpod.ManagedByValue, agentpod.LabelRole: role}
	if role == agentpod.RoleAgent {
		labels[agentpod.LabelAgent] = "agent-" + name
	}
	_, err := cs.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Annotations: ann},
		Spec: corev1.PodSpec{TerminationGracePeriodSeconds: ptr.To(int64(0)),
			Containers: []corev1.Container{{Name: "c", Image: "example.invalid/none:1"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
}

// tokensOf is a proxy pod's token annotations, and its runs' agents.
func tokensOf(ctx context.Context, t *testing.T, cs kubernetes.Interface, ns, name string) (tokens, agents map[string]string) {
	t.Helper()
	p, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tokens, agents = map[string]string{}, map[string]string{}
	for k, v := range p.Annotations {
		if strings.HasPrefix(k, inject.AnnotationTokenPrefix) {
			tokens[k] = v
		}
		if strings.HasPrefix(k, spend.AnnotationAgentPrefix) {
			agents[k] = v
		}
	}
	return tokens, agents
}

// await waits until the proxy pod's tokens are want's (each value's hash,
// then its pod's IP once kwok gave it one), and their runs' agents
// agents' (by the hash's first 40 digits).
func await(ctx context.Context, t *testing.T, cs kubernetes.Interface, ns, proxy string, want, agents map[string]string) {
	t.Helper()
	var got, gotAgents map[string]string
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		got, gotAgents = tokensOf(ctx, t, cs, ns, proxy)
		ok := len(got) == len(want) && len(gotAgents) == len(agents)
		for k, h := range want {
			ok = ok && strings.HasPrefix(got[k], h+" ")
		}
		for h, a := range agents {
			ok = ok && gotAgents[spend.AnnotationAgentPrefix+h[:40]] == a
		}
		if ok {
			return
		}
	}
	t.Fatalf("the proxy's tokens after 30 s: %v, agents %v; want the hashes %v, each with its pod's IP, and agents %v", got, gotAgents, want, agents)
}

// TestTokensFollowRuns: against the test control plane (kwok runs the
// pods): the proxy pod gets one annotation per live run's token (hash and
// IP), loses a run's when its pod is deleted and a stray one at once, and
// a new controller (a restarted daemon) keeps the live ones; a proxy pod
// that starts later gets them all; another namespace's tokens stay there.
func TestTokensFollowRuns(t *testing.T) {
	c := testcluster.Get(t)
	cs := c.Client()
	ns, other := c.Namespace(t, "tokens", nil), c.Namespace(t, "tokens", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	hA, hB, hO := agentpod.TokenHash("a"), agentpod.TokenHash("b"), agentpod.TokenHash("o")
	createPod(ctx, t, cs, ns, "proxy", agentpod.RoleEgressProxy,
		map[string]string{inject.AnnotationKey(agentpod.TokenHash("stale")): "x", "keep.example.com/mine": "yes"})
	createPod(ctx, t, cs, ns, "run-a", agentpod.RoleAgent, map[string]string{agentpod.AnnotationTokenHash: hA})
	createPod(ctx, t, cs, ns, "run-b", agentpod.RoleAgent, map[string]string{agentpod.AnnotationTokenHash: hB})
	createPod(ctx, t, cs, ns, "no-token", agentpod.RoleAgent, nil)
	createPod(ctx, t, cs, other, "proxy", agentpod.RoleEgressProxy, nil)
	createPod(ctx, t, cs, other, "run-o", agentpod.RoleAgent, map[string]string{agentpod.AnnotationTokenHash: hO})

	run := func() context.CancelFunc {
		cctx, stop := context.WithCancel(ctx)
		if err := New(cs, Options{}).Run(cctx); err != nil {
			t.Fatal(err)
		}
		return stop
	}
	stop := run()
	await(ctx, t, cs, ns, "proxy", map[string]string{inject.AnnotationKey(hA): hA, inject.AnnotationKey(hB): hB},
		map[string]string{hA: "agent-run-a", hB: "agent-run-b"})
	await(ctx, t, cs, other, "proxy", map[string]string{inject.AnnotationKey(hO): hO}, map[string]string{hO: "agent-run-o"})
	p, _ := cs.CoreV1().Pods(ns).Get(ctx, "proxy", metav1.GetOptions{})
	if diff := cmp.Diff("yes", p.Annotations["keep.example.com/mine"]); diff != "" {
		t.Errorf("another annotation of the proxy pod (-want +got):\n%s", diff)
	}

	if err := cs.CoreV1().Pods(ns).Delete(ctx, "run-b", metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))}); err != nil {
		t.Fatal(err)
	}
	await(ctx, t, cs, ns, "proxy", map[string]string{inject.AnnotationKey(hA): hA}, map[string]string{hA: "agent-run-a"})

	stop()
	stop = run()
	defer stop()
	createPod(ctx, t, cs, ns, "proxy-2", agentpod.RoleEgressProxy, nil)
	await(ctx, t, cs, ns, "proxy-2", map[string]string{inject.AnnotationKey(hA): hA}, map[string]string{hA: "agent-run-a"})
	await(ctx, t, cs, ns, "proxy", map[string]string{inject.AnnotationKey(hA): hA}, map[string]string{hA: "agent-run-a"})
}
