//go:build integration

package realnode

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/pcsync/pcsync/internal/testing/testcluster"
)

// Pods on the real node resolve cluster names through the cluster DNS the
// harness runs (CoreDNS, Service kube-system/kube-dns): a pod's resolv.conf
// names it with the cluster's search path, a Service of another namespace
// resolves to its ClusterIP by its short and full names, an unknown name of
// the cluster is NXDOMAIN, and a name outside it is refused (nothing is
// forwarded off the machine). NetworkPolicies apply to DNS as in a cluster
// whose CoreDNS runs as pods: beside a pod whose egress policy allows DNS the
// way pcsync's does (namespace kube-system, pods k8s-app: kube-dns, port 53)
// and resolves, a pod whose egress policy leaves DNS out gets no answer.
func TestClusterDNS(t *testing.T) {
	c := testcluster.Get(t)
	cs, node, ns := setup(t)
	ctx := testContext(t)
	other := c.Namespace(t, "dns-other", nil)
	svc, err := cs.CoreV1().Services(other).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "backend"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "backend"}, Ports: []corev1.ServicePort{
			{Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	createDNSPolicies(ctx, t, cs, ns)
	for _, name := range []string{"open", "allowed", "denied"} {
		spec := podSpec(node, node.PauseImage(), nil, corev1.RestartPolicyNever)
		if _, err := cs.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"dns": name}}, Spec: spec,
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"open", "allowed", "denied"} {
		if _, err := waitPod(ctx, cs, ns, name, func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "" }); err != nil {
			t.Fatal(err)
		}
	}

	resolvConf, err := podExec(ctx, c, ns, "open", "main", []string{"/pause", "-read", "/etc/resolv.conf", "-exit", "0"})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"nameserver " + node.ClusterDNS(), "search " + ns + ".svc.cluster.local svc.cluster.local cluster.local"} {
		if !strings.Contains(resolvConf, want) {
			t.Errorf("the pod's resolv.conf lacks %q:\n%s", want, resolvConf)
		}
	}
	full := "backend." + other + ".svc." + testcluster.ClusterDomain
	names := []string{"backend." + other, full, "kubernetes.default", "nothing." + other + ".svc.cluster.local"}
	got := resolveIn(ctx, t, c, ns, "open", names, true)
	got["example.com"] = resolveIn(ctx, t, c, ns, "open", []string{"example.com"}, false)["example.com"]
	want := map[string]string{
		names[0]: "ok " + svc.Spec.ClusterIP,
		names[1]: "ok " + svc.Spec.ClusterIP,
		names[2]: "ok 10.0.0.1",
		names[3]: "nxdomain",
	}
	for name, w := range want {
		if got[name] != w {
			t.Errorf("resolve %s in a pod without policies: %q, want %q", name, got[name], w)
		}
	}
	if strings.HasPrefix(got["example.com"], "ok") {
		t.Errorf("resolve example.com: %q, want no answer (the cluster DNS forwards nothing)", got["example.com"])
	}

	for _, name := range []string{"allowed", "denied"} {
		if err := node.WaitFirewalled(ctx, ns, name); err != nil {
			t.Fatal(err)
		}
	}
	allowed := resolveIn(ctx, t, c, ns, "allowed", []string{full}, true)[full]
	denied := resolveIn(ctx, t, c, ns, "denied", []string{full}, false)[full]
	if allowed != "ok "+svc.Spec.ClusterIP {
		t.Fatalf("control: the pod whose policy allows kube-dns on port 53 resolves %s: %q, want ok %s", full, allowed, svc.Spec.ClusterIP)
	}
	if strings.HasPrefix(denied, "ok") {
		t.Errorf("the pod whose egress policy leaves DNS out resolved %s: %q, want no answer", full, denied)
	}
	t.Logf("CoreDNS resident: %d MiB; denied pod's lookup: %s", node.ResidentMemory()["coredns"]>>20, denied)
}

// createDNSPolicies selects pods "allowed" and "denied" of ns with an egress
// policy each: the first's lets DNS reach kube-dns as pcsync's rendered policy
// does, the second's allows only TCP 8080 to the pod range.
func createDNSPolicies(ctx context.Context, t *testing.T, cs kubernetes.Interface, ns string) {
	t.Helper()
	dns := networkingv1.NetworkPolicyEgressRule{
		To: []networkingv1.NetworkPolicyPeer{{
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "kube-system"}},
			PodSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"k8s-app": "kube-dns"}},
		}},
		Ports: []networkingv1.NetworkPolicyPort{
			{Protocol: ptr.To(corev1.ProtocolUDP), Port: ptr.To(intstr.FromInt32(53))},
			{Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To(intstr.FromInt32(53))},
		},
	}
	other := networkingv1.NetworkPolicyEgressRule{
		To:    []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "10.201.0.0/24"}}},
		Ports: []networkingv1.NetworkPolicyPort{{Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To(intstr.FromInt32(8080))}},
	}
	for name, rule := range map[string]networkingv1.NetworkPolicyEgressRule{"allowed": dns, "denied": other} {
		_, err := cs.NetworkingV1().NetworkPolicies(ns).Create(ctx, &networkingv1.NetworkPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: "egress-" + name},
			Spec: networkingv1.NetworkPolicySpec{
				PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"dns": name}},
				PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
				Egress:      []networkingv1.NetworkPolicyEgressRule{rule},
			},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// resolveIn looks names up in pod ns/name (`/pause -resolve`) and returns each
// name's outcome. With retry, the lookups are repeated for up to 20 s while
// one is neither "ok" nor "nxdomain": a new Service reaches CoreDNS through
// its watch, a new policy kube-router at its next sync.
func resolveIn(ctx context.Context, t *testing.T, c *testcluster.Cluster, ns, pod string, names []string, retry bool) map[string]string {
	t.Helper()
	cmd := []string{"/pause", "-timeout", "3s"}
	for _, n := range names {
		cmd = append(cmd, "-resolve", n)
	}
	cmd = append(cmd, "-exit", "0")
	var got map[string]string
	for deadline := time.Now().Add(20 * time.Second); ; {
		out, err := podExec(ctx, c, ns, pod, "main", cmd)
		if err != nil {
			t.Fatal(err)
		}
		got = map[string]string{}
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			if rest, ok := strings.CutPrefix(line, "resolve "); ok {
				if name, outcome, ok := strings.Cut(rest, ": "); ok {
					got[name] = outcome
				}
			}
		}
		settled := len(got) == len(names)
		for _, n := range names {
			settled = settled && (strings.HasPrefix(got[n], "ok") || got[n] == "nxdomain")
		}
		if !retry || settled || time.Now().After(deadline) {
			return got
		}
		time.Sleep(time.Second)
	}
}
