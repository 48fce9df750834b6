package daemon

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/pcsync/pcsync/internal/doctor"
	"github.com/pcsync/pcsync/internal/netprobe"
	"github.com/pcsync/pcsync/pkg/config"
	"github.com/pcsync/pcsync/pkg/metrics"
	"github.com/pcsync/pcsync/pkg/reconcile"
)

// TestDaemonNetworkCheck is a narrow unit test of the daemon's wiring (the
// check itself runs on real nodes in test/realnode): after the first
// successful reconcile the check runs once in the background; a probe pod
// that reports a connection to its node's kubelet makes the daemon log the
// warning and set pcsync_network_policies_enforced to 0. The fake
// clientset stands in for the kubelet: each probe pod is stored as ended
// with the report.
func TestDaemonNetworkCheck(t *testing.T) {
	dir := t.TempDir()
	for name, content := range map[string]string{
		"settings.yaml": "apiVersion: pcsync.io/v1alpha1\nkind: Settings\nmetadata: {name: s}\nspec:\n  namespacePrefix: t-\n",
		"acme.yaml":     "apiVersion: pcsync.io/v1alpha1\nkind: Company\nmetadata: {name: acme}\nspec:\n  id: acme-1\n  agents: [{name: coder, adapter: claude_local}]\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	model, err := config.Load(context.Background(), dir, config.DefaultLoadOptions())
	if err != nil {
		t.Fatal(err)
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}}
	node.Status.DaemonEndpoints.KubeletEndpoint.Port = 10250
	cs := fake.NewClientset(node,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "t-acme"}},
		&networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "paperclip-deny-all", Namespace: "t-acme"},
			Spec: networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}}},
	)
	probes := make(chan *corev1.Pod, 4)
	cs.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		pod := a.(k8stesting.CreateAction).GetObject().(*corev1.Pod)
		pod.Name = pod.GenerateName + "x1"
		pod.Spec.NodeName = "node-1"
		rep := netprobe.Report{Version: netprobe.Version, Results: []netprobe.Result{{Target: "10.9.9.9:10250", Outcome: netprobe.Connected}}}
		pod.Status = corev1.PodStatus{Phase: corev1.PodSucceeded, HostIP: "10.9.9.9", ContainerStatuses: []corev1.ContainerStatus{{
			Name: "netprobe", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Message: string(rep.Encode())}}}}}
		probes <- pod.DeepCopy()
		return false, nil, nil
	})

	var logs bytes.Buffer
	m := metrics.New()
	nc := NewNetworkCheck(slog.New(slog.NewTextHandler(&logs, nil)), cs, m)
	observe := nc.Observe(context.Background(), nil)
	observe(reconcile.Outcome{Err: context.Canceled}) // a failed reconcile starts nothing
	select {
	case p := <-probes:
		t.Fatalf("probe pod %s after a failed reconcile", p.Name)
	case <-time.After(200 * time.Millisecond):
	}
	observe(reconcile.Outcome{Model: model})
	observe(reconcile.Outcome{Model: model}) // once only
	p := <-probes
	if p.Namespace != "t-acme" || p.Labels["paperclip.io/role"] != "agent" {
		t.Errorf("probe pod %s/%s labels %v: want one in t-acme labelled as an agent", p.Namespace, p.Name, p.Labels)
	}
	want := "# HELP pcsync_network_policies_enforced Whether the daemon's network check at start proved the tenants' NetworkPolicies enforced: 1 yes, 0 no (agents are not isolated), -1 not proven.\n" +
		"# TYPE pcsync_network_policies_enforced gauge\npcsync_network_policies_enforced 0\n"
	deadline := time.Now().Add(10 * time.Second)
	for testutil.GatherAndCompare(m.Registry, strings.NewReader(want), "pcsync_network_policies_enforced") != nil {
		if time.Now().After(deadline) {
			t.Fatalf("pcsync_network_policies_enforced never 0; logs:\n%s", logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got := logs.String(); !strings.Contains(got, `level=WARN msg="`+doctor.NotEnforcedMessage+`"`) || !strings.Contains(got, "namespace=t-acme") {
		t.Errorf("logs lack the warning:\n%s", got)
	}
	select {
	case p := <-probes:
		t.Errorf("a second probe pod %s", p.Name)
	default:
	}
	pods, _ := cs.CoreV1().Pods("t-acme").List(context.Background(), metav1.ListOptions{})
	if len(pods.Items) != 0 {
		t.Errorf("%d probe pods left", len(pods.Items))
	}
}
