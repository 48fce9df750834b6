//go:build integration

package realnode

import (
	"context"
	"net"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pcsync/pcsync/internal/testing/testcluster"
)

// The enforcer switches at run time: a pod behind a deny-all ingress policy is
// refused to another pod while kube-router runs, reached once StopNetworkPolicy
// has returned (its rules are gone), and refused again after StartNetworkPolicy.
func TestNetworkPolicyStopStart(t *testing.T) {
	c := testcluster.Get(t)
	cs, node, ns := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	if !node.NetworkPolicy() {
		t.Fatal("the real node does not enforce NetworkPolicies: TestMain sets RealNodeOptions.NetworkPolicy")
	}
	t.Cleanup(func() {
		if err := node.StartNetworkPolicy(context.Background()); err != nil {
			t.Errorf("restart the enforcer: %v", err)
		}
	})
	_, err := cs.NetworkingV1().NetworkPolicies(ns).Create(ctx, &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "deny-ingress"},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "target"}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	spec := podSpec(node, node.PauseImage(), []string{"/pause", "-listen", "tcp:8080", "-banner", "target"}, corev1.RestartPolicyNever)
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "target", Labels: map[string]string{"app": "target"}}, Spec: spec,
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	createPod(ctx, t, cs, ns, "client", podSpec(node, node.PauseImage(), nil, corev1.RestartPolicyNever), false)
	target, err := waitPod(ctx, cs, ns, "target", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "" })
	if err != nil {
		t.Fatal(err)
	}
	dial := "tcp:" + net.JoinHostPort(target.Status.PodIP, "8080")
	probe := func(phase, want string) {
		t.Helper()
		out, err := podExec(ctx, c, ns, "client", "main", pauseDial(dial))
		if err != nil {
			t.Fatal(err)
		}
		if got := parseDials(t, out, []string{dial})[dial]; got != want {
			t.Errorf("%s: client → target: %q, want %q", phase, got, want)
		}
	}

	if err := node.WaitFirewalled(ctx, ns, "target"); err != nil {
		t.Fatal(err)
	}
	probe("enforcing", "refused")
	t.Logf("resident memory while enforcing: %v", node.ResidentMemory())
	if err := node.StopNetworkPolicy(ctx); err != nil {
		t.Fatal(err)
	}
	if node.NetworkPolicy() {
		t.Error("NetworkPolicy() after StopNetworkPolicy: true")
	}
	if err := node.WaitFirewalled(ctx, ns, "target"); err == nil {
		t.Error("WaitFirewalled succeeded with the enforcer stopped")
	}
	probe("stopped", "ok target")
	if err := node.StartNetworkPolicy(ctx); err != nil {
		t.Fatal(err)
	}
	if err := node.WaitFirewalled(ctx, ns, "target"); err != nil {
		t.Fatal(err)
	}
	probe("restarted", "refused")
}
