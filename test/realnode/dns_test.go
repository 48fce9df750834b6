//go:build integration

package realnode

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pcsync/pcsync/internal/testing/testcluster"
	"github.com/pcsync/pcsync/pkg/egressproxy/allow"
)

// dnsProbeScript prints the pod's nameservers, what its resolver (getaddrinfo,
// /etc/resolv.conf) answers for argv[1], and what the cluster's DNS server
// argv[2] answers when asked straight, over UDP, past the pod's resolv.conf.
const dnsProbeScript = `
const dns = require('dns'), fs = require('fs');
const [name, server] = process.argv.slice(1);
const ns = fs.readFileSync('/etc/resolv.conf', 'utf8').split('\n').filter(l => l.startsWith('nameserver')).join(',');
console.log('resolv: ' + ns);
dns.lookup(name, {family: 4}, (err, addr) => {
  console.log('lookup: ' + (err ? 'error ' + err.code : 'ok ' + addr));
  const r = new dns.Resolver({timeout: 3000, tries: 1});
  r.setServers([server]);
  r.resolve4(name, (err, addrs) => console.log('direct: ' + (err ? 'error ' + err.code : 'ok ' + addrs.join(','))));
});
`

// dnsProbe runs dnsProbeScript in a pod's container and returns its three
// lines by their key.
func dnsProbe(ctx context.Context, t *testing.T, c *testcluster.Cluster, pod *corev1.Pod, name, server string) map[string]string {
	t.Helper()
	out, err := podExec(ctx, c, pod.Namespace, pod.Name, pod.Spec.Containers[0].Name, []string{"node", "-e", dnsProbeScript, name, server})
	if err != nil {
		t.Fatalf("DNS probe in %s/%s: %v\n%s", pod.Namespace, pod.Name, err, out)
	}
	return parseDNSProbe(out)
}

// parseDNSProbe maps dnsProbeScript's lines by their key.
func parseDNSProbe(out string) map[string]string {
	got := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if k, v, ok := strings.Cut(line, ": "); ok {
			got[k] = v
		}
	}
	return got
}

// clusterDNS is the address of the real node's cluster DNS (CoreDNS, behind
// Service kube-system/kube-dns).
func clusterDNS(ctx context.Context, t *testing.T, c *testcluster.Cluster) string {
	t.Helper()
	svc, err := c.Client().CoreV1().Services(metav1.NamespaceSystem).Get(ctx, "kube-dns", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the real node's cluster DNS: %v", err)
	}
	return svc.Spec.ClusterIP
}

// assertNoDNS checks a DNS probe's answers in an agent of egress mode proxy:
// only its loopback as nameserver, its lookup failed, and the cluster's
// DNS server, asked straight, did not answer.
func assertNoDNS(t *testing.T, who string, got map[string]string, name, server string) {
	t.Helper()
	t.Logf("DNS from %s for %s: %v", who, name, got)
	if got["resolv"] != "nameserver 127.0.0.1" {
		t.Errorf("%s: resolv.conf nameservers %q, want only its loopback", who, got["resolv"])
	}
	if !strings.HasPrefix(got["lookup"], "error ") {
		t.Errorf("%s resolved %s through its resolver: %q; want an error", who, name, got["lookup"])
	}
	if !strings.HasPrefix(got["direct"], "error ") {
		t.Errorf("%s got an answer from the cluster's DNS server %s for %s: %q; want none (its policy opens no DNS)",
			who, server, name, got["direct"])
	}
}

// checkNoDNSChannel proves, on the enforcing node, that an agent pod of a
// company in egress mode proxy has no DNS channel, against the cluster's
// real DNS server (CoreDNS, Service kube-system/kube-dns): a control pod in
// a namespace without policies, of the same image, resolves the company's
// own proxy Service name through its resolv.conf and straight from the
// server, and gets the Service's ClusterIP; the agent's resolv.conf names
// only its loopback, its lookup fails, and the same query sent straight to
// the server gets no answer (the tenant's policy drops it).
func checkNoDNSChannel(ctx context.Context, t *testing.T, c *testcluster.Cluster, agent *corev1.Pod, proxyIP string) {
	t.Helper()
	server := clusterDNS(ctx, t, c)
	name := allow.ProxyName + "." + agent.Namespace + ".svc.cluster.local"
	ctlNS := c.Namespace(t, "dnsctl", nil)
	ctl := plainPod(c.RealNode(), ctlNS, "dns-control", agent.Spec.Containers[0].Image, "sleep", "600")
	if _, err := c.Client().CoreV1().Pods(ctlNS).Create(ctx, ctl, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ctlPod := waitRunning(ctx, t, c, ctlNS, "")
	want := "ok " + proxyIP
	// The control: the real server answers the name, asked either way.
	var got map[string]string
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(time.Second) {
		got = dnsProbe(ctx, t, c, ctlPod, name, server)
		if (got["lookup"] == want && got["direct"] == want) || time.Now().After(deadline) {
			break
		}
	}
	t.Logf("DNS from control pod %s/%s for %s: %v", ctlNS, ctlPod.Name, name, got)
	if got["lookup"] != want || got["direct"] != want || !strings.Contains(got["resolv"], server) {
		t.Fatalf("control pod %s/%s: %v; want its resolv.conf to name %s and %s for %s both ways (the control must resolve, or the refusal below proves nothing)",
			ctlNS, ctlPod.Name, got, server, want, name)
	}
	assertNoDNS(t, "agent pod "+agent.Namespace+"/"+agent.Name, dnsProbe(ctx, t, c, agent, name, server), name, server)
}
