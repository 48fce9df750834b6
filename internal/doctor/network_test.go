package doctor

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/pcsync/pcsync/internal/netprobe"
	"github.com/pcsync/pcsync/pkg/config"
	"github.com/pcsync/pcsync/pkg/podsec"
)

func tcp(p int) networkingv1.NetworkPolicyPort {
	return networkingv1.NetworkPolicyPort{Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To(intstr.FromInt32(int32(p)))}
}

// tenantPolicies are policies shaped as pcsync renders them: deny-all, and
// for agents DNS (pods of kube-system), the Paperclip server's port (pods),
// an allowCidrs entry and the public IPv4 addresses on 443.
func tenantPolicies() []networkingv1.NetworkPolicy {
	agents := metav1.LabelSelector{MatchLabels: map[string]string{"paperclip.io/role": "agent"}}
	pods := []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{}, PodSelector: &metav1.LabelSelector{}}}
	return []networkingv1.NetworkPolicy{
		{Spec: networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}}},
		{Spec: networkingv1.NetworkPolicySpec{PodSelector: agents, PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
			Egress: []networkingv1.NetworkPolicyEgressRule{
				{To: pods, Ports: []networkingv1.NetworkPolicyPort{{Protocol: ptr.To(corev1.ProtocolUDP), Port: ptr.To(intstr.FromInt32(53))}, tcp(53)}},
				{To: pods, Ports: []networkingv1.NetworkPolicyPort{tcp(3100)}},
				{To: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "10.96.5.0/24"}}}, Ports: []networkingv1.NetworkPolicyPort{
					{Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To(intstr.FromInt32(6000)), EndPort: ptr.To(int32(6443))}}},
				{To: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "0.0.0.0/0", Except: []string{"10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"}}}},
					Ports: []networkingv1.NetworkPolicyPort{tcp(443)}},
			}}},
	}
}

// TestEgressAllows: what the tenant's policies allow an agent, as an
// enforcing plugin would judge it; a pod no Egress policy selects may
// reach anything.
func TestEgressAllows(t *testing.T) {
	agent := map[string]string{"paperclip.io/role": "agent"}
	for _, tc := range []struct {
		name   string
		labels map[string]string
		target string
		want   bool
	}{
		{"kubelet on a private node IP", agent, "10.200.0.1:10250", false},
		{"API server on a private IP", agent, "10.0.0.1:6443", false},
		{"API server in allowCidrs, in the port range", agent, "10.96.5.7:6443", true},
		{"allowCidrs address, port outside the range", agent, "10.96.5.7:10250", false},
		{"API server on a public IP and 443", agent, "203.0.113.10:443", true},
		{"public IP, another port", agent, "203.0.113.10:6443", false},
		{"any address on the server's port (a pod peer)", agent, "10.200.0.1:3100", true},
		{"not an agent: only deny-all", map[string]string{}, "203.0.113.10:443", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ap := netip.MustParseAddrPort(tc.target)
			if got := egressAllows(tenantPolicies(), tc.labels, ap.Addr(), int(ap.Port())); got != tc.want {
				t.Errorf("egressAllows(%s) = %v, want %v", tc.target, got, tc.want)
			}
		})
	}
	ap := netip.MustParseAddrPort("10.200.0.1:10250")
	if !egressAllows(tenantPolicies()[1:2], map[string]string{}, ap.Addr(), int(ap.Port())) {
		t.Error("a pod no Egress policy selects: not allowed, want allowed")
	}
}

// TestJudge: a connection to a forbidden target is "not enforced"; every
// one blocked is "enforced"; an error or only allowed targets prove
// nothing.
func TestJudge(t *testing.T) {
	res := func(target string, o netprobe.Outcome) netprobe.Result {
		return netprobe.Result{Target: target, Outcome: o}
	}
	pod := &corev1.Pod{Spec: corev1.PodSpec{NodeName: "n1"}}
	api := "10.0.0.1:6443"
	for _, tc := range []struct {
		name    string
		results []netprobe.Result
		want    Verdict
		reason  string
	}{
		{"kubelet connected", []netprobe.Result{res("10.200.0.1:10250", netprobe.Connected), res(api, netprobe.Refused)}, NotEnforced, ""},
		{"API server connected", []netprobe.Result{res("10.200.0.1:10250", netprobe.TimedOut), res(api, netprobe.Connected)}, NotEnforced, ""},
		{"all blocked", []netprobe.Result{res("10.200.0.1:10250", netprobe.Refused), res(api, netprobe.Unreachable)}, Enforced, ""},
		{"an error", []netprobe.Result{res("10.200.0.1:10250", netprobe.Refused), res(api, netprobe.Failed)}, Unproven, "could not try " + api},
		{"only allowed targets", []netprobe.Result{res("203.0.113.10:443", netprobe.Connected)}, Unproven, "allow every target"},
		{"no result", nil, Unproven, "allow every target"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := NetworkResult{Namespace: "t-acme", Verdict: Unproven}
			r.judge(netprobe.Report{Version: netprobe.Version, Results: tc.results}, pod, api, kubeletPort{port: 10250}, tenantPolicies(),
				map[string]string{"paperclip.io/role": "agent"})
			if r.Verdict != tc.want || !strings.Contains(r.Reason, tc.reason) {
				t.Errorf("verdict %s (%q), want %s (%q)", r.Verdict, r.Reason, tc.want, tc.reason)
			}
			if tc.want == NotEnforced && !strings.HasPrefix(r.Message(), NotEnforcedMessage) {
				t.Errorf("message %q does not start with %q", r.Message(), NotEnforcedMessage)
			}
		})
	}
}

func TestPluginOf(t *testing.T) {
	got := map[string]string{}
	for _, ds := range []string{"kindnet", "kube-flannel-ds", "calico-node", "cilium", "cilium-envoy", "kube-router", "aws-node", "kube-proxy", "kindnetd-x"} {
		got[ds] = pluginOf(ds)
	}
	want := map[string]string{"kindnet": "kindnet", "kube-flannel-ds": "flannel", "calico-node": "Calico", "cilium": "Cilium",
		"cilium-envoy": "Cilium", "kube-router": "kube-router", "aws-node": "Amazon VPC CNI", "kube-proxy": "", "kindnetd-x": ""}
	if d := cmp.Diff(want, got); d != "" {
		t.Error(d)
	}
}

// TestBuildProbePod: the probe pod runs pcsync's image, is labelled as an
// agent of its company (so its egress policy selects it), is hardened and
// scheduled as its agents are, and tries the kubelet port of its own node
// (downward API) and the targets given.
func TestBuildProbePod(t *testing.T) {
	dir := t.TempDir()
	for name, content := range map[string]string{
		"settings.yaml": "apiVersion: pcsync.io/v1alpha1\nkind: Settings\nmetadata: {name: s}\nspec:\n  images: {registry: reg.example/pcsync, pullSecrets: [regcred]}\n",
		"acme.yaml": "apiVersion: pcsync.io/v1alpha1\nkind: Company\nmetadata: {name: acme}\nspec:\n  id: acme-1\n" +
			"  runtimeClassName: gvisor\n  agents: [{name: coder, adapter: claude_local, nodeSelector: {disk: ssd}}]\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	lo := config.DefaultLoadOptions()
	lo.Images.Tag = "v9"
	m, err := config.Load(context.Background(), dir, lo)
	if err != nil {
		t.Fatal(err)
	}
	c := &m.Companies[0]
	opts := DefaultNetworkOptions()
	pod, err := buildProbePod(m, c, "t-acme", []int{10250}, []string{"10.0.0.1:6443"}, opts)
	if err != nil {
		t.Fatal(err)
	}
	hard, err := podsec.For(podsec.DefaultServiceAccount, podsec.DefaultUID, m.Jobs(c).EmptyDirSizeLimit)
	if err != nil {
		t.Fatal(err)
	}
	want := corev1.PodSpec{Containers: []corev1.Container{{}}}
	hard.Apply(&want)
	if d := cmp.Diff(podsec.Of(&want), podsec.Of(&pod.Spec)); d != "" {
		t.Errorf("hardening (-agent's +probe's):\n%s", d)
	}
	ctr := pod.Spec.Containers[0]
	got := map[string]string{
		"image":   ctr.Image,
		"command": strings.Join(ctr.Command, " "),
		"role":    pod.Labels["paperclip.io/role"],
		"company": pod.Labels["paperclip.io/company"],
		"runtime": ptr.Deref(pod.Spec.RuntimeClassName, ""),
		"node":    pod.Spec.NodeSelector["disk"],
		"pull":    pod.Spec.ImagePullSecrets[0].Name,
		"hostIP":  ctr.Env[0].Name + "=" + ctr.Env[0].ValueFrom.FieldRef.FieldPath,
	}
	wantFields := map[string]string{
		"image":   "reg.example/pcsync/pcsync:v9",
		"command": "/usr/local/bin/pcsync netprobe --connect $(PCSYNC_HOST_IP):10250,10.0.0.1:6443 --timeout 3s --settle 3s --attempts 3 --interval 2s",
		"role":    "agent",
		"company": "acme",
		"runtime": "gvisor",
		"node":    "ssd",
		"pull":    "regcred",
		"hostIP":  "PCSYNC_HOST_IP=status.hostIP",
	}
	if d := cmp.Diff(wantFields, got); d != "" {
		t.Errorf("probe pod (-want +got):\n%s", d)
	}
}

func TestAPIServerAddress(t *testing.T) {
	got := map[string]bool{}
	for _, a := range []string{"10.0.0.5", "203.0.113.10", "fd00::1", "127.0.0.1", "::1", "0.0.0.0", "not-an-ip"} {
		got[a] = apiServerAddress(a)
	}
	want := map[string]bool{"10.0.0.5": true, "203.0.113.10": true, "fd00::1": true, "127.0.0.1": false, "::1": false, "0.0.0.0": false, "not-an-ip": false}
	if d := cmp.Diff(want, got); d != "" {
		t.Error(d)
	}
}

// TestNotEnforcedMessage: the message names what was reached first, the
// other targets after, and the plugin.
func TestNotEnforcedMessage(t *testing.T) {
	r := NetworkResult{Verdict: NotEnforced, Namespace: "t-acme", Plugins: []string{"flannel (DaemonSet kube-flannel/kube-flannel-ds)"},
		Targets: []Target{
			{What: "kubelet", Result: netprobe.Result{Target: "10.200.0.1:10250", Outcome: netprobe.Refused}},
			{What: "API server", Result: netprobe.Result{Target: "10.0.0.5:6443", Outcome: netprobe.Connected}},
		}}
	want := NotEnforcedMessage + ": a probe pod labelled and hardened as an agent of namespace t-acme reached what the tenant's " +
		"NetworkPolicies forbid: 10.0.0.5:6443 (API server): connected (and: 10.200.0.1:10250 (kubelet): refused); " +
		"network plugin: flannel (DaemonSet kube-flannel/kube-flannel-ds); install a plugin that enforces NetworkPolicies"
	if d := cmp.Diff(want, r.Message()); d != "" {
		t.Error(d)
	}
}

// fakeNetwork is a fake clientset holding an applied tenant (namespace
// paperclip-acme and its policies) and nodes, that stands in for the
// kubelet: each probe pod is stored as ended on node n1 (host IP
// 10.200.0.1) with the report its --connect targets get from outcomes,
// by target; a target not in outcomes is refused, as a closed port is.
func fakeNetwork(t *testing.T, nodes []corev1.Node, outcomes map[string]netprobe.Outcome) (*fake.Clientset, *[]string) {
	t.Helper()
	objs := []runtime.Object{&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "paperclip-acme"}}}
	for i, p := range tenantPolicies() {
		p.Name, p.Namespace = fmt.Sprintf("policy-%d", i), "paperclip-acme"
		objs = append(objs, &p)
	}
	for i := range nodes {
		objs = append(objs, &nodes[i])
	}
	cs := fake.NewClientset(objs...)
	var tried []string
	cs.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		pod := a.(k8stesting.CreateAction).GetObject().(*corev1.Pod)
		pod.Name, pod.Spec.NodeName = pod.GenerateName+"x1", "n1"
		cmd := pod.Spec.Containers[0].Command
		i := slices.Index(cmd, "--connect")
		rep := netprobe.Report{Version: netprobe.Version}
		for _, target := range strings.Split(cmd[i+1], ",") {
			target = strings.ReplaceAll(target, "$("+hostIPEnv+")", "10.200.0.1")
			tried = append(tried, target)
			o, ok := outcomes[target]
			if !ok {
				o = netprobe.Refused
			}
			rep.Results = append(rep.Results, netprobe.Result{Target: target, Outcome: o})
		}
		pod.Status = corev1.PodStatus{Phase: corev1.PodSucceeded, HostIP: "10.200.0.1", ContainerStatuses: []corev1.ContainerStatus{{
			Name: probeContainer, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Message: string(rep.Encode())}}}}}
		return false, nil, nil
	})
	return cs, &tried
}

func node(name string, kubeletPort int32) corev1.Node {
	n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	n.Status.DaemonEndpoints.KubeletEndpoint.Port = kubeletPort
	return n
}

// TestProbeNetworkKubeletPort: the probe tries the kubelet port the Nodes
// report, and only a refusal on the port of its own node's Node is
// evidence; with no port known (and no API server address) the check
// cannot prove anything, and says so. A narrow unit test: the fake
// clientset stands in for the kubelet (fakeNetwork).
func TestProbeNetworkKubeletPort(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "acme.yaml"), []byte("apiVersion: pcsync.io/v1alpha1\nkind: Company\nmetadata: {name: acme}\nspec:\n  id: acme-1\n"+
		"  agents: [{name: coder, adapter: claude_local}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := config.Load(context.Background(), dir, config.DefaultLoadOptions())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		nodes     []corev1.Node
		port      int // NetworkOptions.KubeletPort
		outcomes  map[string]netprobe.Outcome
		want      Verdict
		wantTried []string
		reason    string
	}{
		{"the Node's port reached, 10250 closed", []corev1.Node{node("n1", 10255)}, 0,
			map[string]netprobe.Outcome{"10.200.0.1:10255": netprobe.Connected}, NotEnforced, []string{"10.200.0.1:10255"}, ""},
		{"the Node's port refused", []corev1.Node{node("n1", 10255)}, 0, nil, Enforced, []string{"10.200.0.1:10255"}, ""},
		{"another node's port refused, its own timed out", []corev1.Node{node("n1", 10255), node("n2", 10250)}, 0,
			map[string]netprobe.Outcome{"10.200.0.1:10255": netprobe.TimedOut}, Enforced, []string{"10.200.0.1:10250", "10.200.0.1:10255"}, ""},
		{"only another node's port refused", []corev1.Node{node("n1", 10255), node("n2", 10250)}, 0,
			map[string]netprobe.Outcome{"10.200.0.1:10255": netprobe.Failed}, Unproven, []string{"10.200.0.1:10250", "10.200.0.1:10255"},
			"not the kubelet port of node n1 (10255)"},
		{"no Node reports a port", []corev1.Node{node("n1", 0)}, 0, nil, Unproven, nil, "no Node reports its kubelet port"},
		{"--kubelet-port", []corev1.Node{node("n1", 0)}, 10250, nil, Enforced, []string{"10.200.0.1:10250"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs, tried := fakeNetwork(t, tc.nodes, tc.outcomes)
			opts := DefaultNetworkOptions()
			opts.KubeletPort, opts.Timeout = tc.port, 10*time.Second
			r := ProbeNetwork(context.Background(), cs, m, opts)
			if r.Verdict != tc.want || !strings.Contains(r.Message(), tc.reason) {
				t.Errorf("verdict %s, want %s with %q: %s", r.Verdict, tc.want, tc.reason, r.Message())
			}
			if d := cmp.Diff(tc.wantTried, *tried); d != "" {
				t.Errorf("targets tried (-want +got):\n%s", d)
			}
		})
	}
}
