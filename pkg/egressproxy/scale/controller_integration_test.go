//go:build integration

package scale

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/pcsync/pcsync/internal/lib/agentpod"
	"github.com/pcsync/pcsync/internal/testing/testcluster"
	"github.com/pcsync/pcsync/pkg/egressproxy/allow"
)

func TestMain(m *testing.M) { os.Exit(testcluster.Main(m)) }

// proxyDeployment is a proxy Deployment as pcsync renders it: no replicas.
func proxyDeployment(ns string) *appsv1.Deployment {
	sel := map[string]string{agentpod.LabelRole: agentpod.RoleEgressProxy}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: allow.ProxyName, Namespace: ns,
			Labels: map[string]string{agentpod.LabelManagedBy: agentpod.ManagedByValue}},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: sel},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: sel},
				Spec: corev1.PodSpec{TerminationGracePeriodSeconds: ptr.To(int64(0)),
					Containers: []corev1.Container{{Name: "egress-proxy", Image: "example.invalid/pcsync:1"}}},
			},
		},
	}
}

// waitReplicas waits until ns's proxy Deployment asks for want replicas.
func waitReplicas(ctx context.Context, t *testing.T, cs kubernetes.Interface, ns string, want int32, within time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	var got int32 = -1
	for time.Since(start) < within {
		d, err := cs.AppsV1().Deployments(ns).Get(ctx, allow.ProxyName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got = replicas(d.Spec.Replicas); got == want {
			return time.Since(start)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("Deployment/%s/%s: %d replicas after %s, want %d", ns, allow.ProxyName, got, within, want)
	return 0
}

// TestProxyFollowsWork: against the test control plane (kwok runs the
// pods): a new proxy sleeps after its idle period; Need wakes it and Ready
// returns once its pod is available; a live agent pod keeps it up past
// the Need, and its end starts the idle period; pcsync's own apply of the
// Deployment (no replicas) leaves the scale alone; an idle period of 0
// keeps the proxy up; another namespace is not touched.
func TestProxyFollowsWork(t *testing.T) {
	c := testcluster.Get(t)
	cs := c.Client()
	ns, never, other := c.Namespace(t, "scale", nil), c.Namespace(t, "scale", nil), c.Namespace(t, "scale", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for _, n := range []string{ns, never, other} {
		if _, err := cs.AppsV1().Deployments(n).Create(ctx, proxyDeployment(n), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	idle := map[string]time.Duration{ns: 2 * time.Second, never: 0}
	f := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.LabelSelector = agentpod.LabelManagedBy + "=" + agentpod.ManagedByValue
	}))
	pods := f.Core().V1().Pods().Informer()
	opts := DefaultOptions()
	opts.NeedFor = time.Second
	opts.Idle = func(n string) (time.Duration, bool) { d, ok := idle[n]; return d, ok }
	ctl, err := New(cs, pods, opts)
	if err != nil {
		t.Fatal(err)
	}
	f.Start(ctx.Done())
	defer func() { cancel(); f.Shutdown() }()
	if err := ctl.Run(ctx); err != nil {
		t.Fatal(err)
	}
	// A second replica's controller, which sees none of the first's Needs.
	peer, err := New(cs, pods, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := peer.Run(ctx); err != nil {
		t.Fatal(err)
	}

	took := waitReplicas(ctx, t, cs, ns, 0, 20*time.Second)
	t.Logf("a new proxy with nothing to serve: scaled to 0 %s after the controller started (idle period 2 s)", took.Round(time.Millisecond))
	assertOwner(ctx, t, cs, ns)

	woken := time.Now()
	if ctl.Need(ns) {
		t.Errorf("Need(%s) says the proxy is up while it is scaled to zero", ns)
	}
	rctx, rcancel := context.WithTimeout(ctx, time.Minute)
	defer rcancel()
	if err := ctl.Ready(rctx, ns); err != nil {
		t.Fatal(err)
	}
	t.Logf("Need → the proxy's pod available in %s", time.Since(woken).Round(time.Millisecond))
	if d, err := cs.AppsV1().Deployments(ns).Get(ctx, allow.ProxyName, metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	} else if n := replicas(d.Spec.Replicas); n != 1 {
		t.Fatalf("Ready returned with Deployment/%s/%s at %d replicas, want 1", ns, allow.ProxyName, n)
	}
	if ctl.Need(ns) {
		t.Errorf("Need(%s) says the proxy is up right after its wake (its Service may not route to it yet)", ns)
	}

	// The peer counts the wake as work: the proxy stays up past the Need
	// for the idle period, without a pod yet.
	time.Sleep(opts.NeedFor + idle[ns]/4)
	waitReplicas(ctx, t, cs, ns, 1, time.Second)

	// A run's pod keeps the proxy up after the Need has passed.
	pod := agentPod(ctx, t, cs, ns)
	time.Sleep(opts.NeedFor + idle[ns] + time.Second)
	waitReplicas(ctx, t, cs, ns, 1, time.Second)
	if !ctl.Need(ns) {
		t.Errorf("Need(%s) says the proxy is waking, %s after its wake", ns, opts.NeedFor+idle[ns]+time.Second)
	}

	// pcsync's apply (no replicas) does not take the scale back.
	applyAsPcsync(ctx, t, cs, ns)
	waitReplicas(ctx, t, cs, ns, 1, time.Second)

	ended := time.Now()
	if err := cs.CoreV1().Pods(ns).Delete(ctx, pod, metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))}); err != nil {
		t.Fatal(err)
	}
	waitReplicas(ctx, t, cs, ns, 0, 20*time.Second)
	if d := time.Since(ended); d < idle[ns] {
		t.Errorf("the proxy slept %s after its last run ended, before its idle period of %s", d, idle[ns])
	}
	waitReplicas(ctx, t, cs, never, 1, time.Second)
	d, err := cs.AppsV1().Deployments(other).Get(ctx, allow.ProxyName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range d.ManagedFields {
		if m.Manager == FieldManager {
			t.Errorf("Deployment/%s/%s (no company's): the scaler manages its fields", other, allow.ProxyName)
		}
	}
}

// agentPod makes a live agent pod in ns and returns its name.
func agentPod(ctx context.Context, t *testing.T, cs kubernetes.Interface, ns string) string {
	t.Helper()
	p, err := cs.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "run", Labels: map[string]string{
			agentpod.LabelManagedBy: agentpod.ManagedByValue, agentpod.LabelRole: agentpod.RoleAgent}},
		Spec: corev1.PodSpec{TerminationGracePeriodSeconds: ptr.To(int64(0)),
			Containers: []corev1.Container{{Name: "agent", Image: "example.invalid/agent:1"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p.Name
}

// applyAsPcsync server-side applies the rendered Deployment (no replicas)
// as pcsync's apply does.
func applyAsPcsync(ctx context.Context, t *testing.T, cs kubernetes.Interface, ns string) {
	t.Helper()
	d := proxyDeployment(ns)
	d.TypeMeta = metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"}
	d.Spec.Template.Annotations = map[string]string{"pcsync.io/applied": "again"}
	body, err := jsonMarshal(d)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.AppsV1().Deployments(ns).Patch(ctx, allow.ProxyName, "application/apply-patch+yaml", body,
		metav1.PatchOptions{FieldManager: "pcsync", Force: ptr.To(true)}); err != nil {
		t.Fatal(err)
	}
}

// assertOwner checks that the scaler's field manager owns spec.replicas.
func assertOwner(ctx context.Context, t *testing.T, cs kubernetes.Interface, ns string) {
	t.Helper()
	d, err := cs.AppsV1().Deployments(ns).Get(ctx, allow.ProxyName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range d.ManagedFields {
		if m.Manager == FieldManager && m.Subresource == "scale" && m.FieldsV1 != nil && containsReplicas(m.FieldsV1.Raw) {
			return
		}
	}
	t.Errorf("Deployment/%s/%s: spec.replicas not owned by %s through the scale subresource: %v", ns, allow.ProxyName, FieldManager, d.ManagedFields)
}

func jsonMarshal(v any) ([]byte, error) { return json.Marshal(v) }

func containsReplicas(raw []byte) bool { return bytes.Contains(raw, []byte(`"f:replicas"`)) }

// TestNeedEndsWithItsPod: a run's Need (NeedFor 10 min here) ends when the
// run's pod is seen, and the pod's end (its phase Succeeded; the pod is on
// a node no kubelet serves, so nothing else changes it) starts the idle
// period: the proxy sleeps 1 s after the run, not after the Need. (The
// scaler once took the end of a run for a wake, and kept the proxy up
// until the Need passed.)
func TestNeedEndsWithItsPod(t *testing.T) {
	c := testcluster.Get(t)
	cs := c.Client()
	ns := c.Namespace(t, "needphase", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := cs.AppsV1().Deployments(ns).Create(ctx, proxyDeployment(ns), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	f := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.LabelSelector = agentpod.LabelManagedBy + "=" + agentpod.ManagedByValue
	}))
	opts := DefaultOptions()
	opts.NeedFor = 10 * time.Minute
	opts.Idle = func(n string) (time.Duration, bool) { return time.Second, n == ns }
	ctl, err := New(cs, f.Core().V1().Pods().Informer(), opts)
	if err != nil {
		t.Fatal(err)
	}
	f.Start(ctx.Done())
	defer func() { cancel(); f.Shutdown() }()
	if err := ctl.Run(ctx); err != nil {
		t.Fatal(err)
	}
	waitReplicas(ctx, t, cs, ns, 0, 20*time.Second)
	ctl.Need(ns)
	waitReplicas(ctx, t, cs, ns, 1, 10*time.Second)
	p, err := cs.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "run", Labels: map[string]string{
			agentpod.LabelManagedBy: agentpod.ManagedByValue, agentpod.LabelRole: agentpod.RoleAgent}},
		Spec: corev1.PodSpec{NodeName: "ghost", Containers: []corev1.Container{{Name: "agent", Image: "example.invalid/agent:1"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second) // the pod seen, live
	p.Status.Phase = corev1.PodSucceeded
	if _, err := cs.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	took := waitReplicas(ctx, t, cs, ns, 0, 20*time.Second)
	t.Logf("the run's pod finished → its proxy asleep in %s (idle period 1 s, NeedFor 10 min)", took.Round(time.Millisecond))
}
