//go:build integration

package realnode

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pcsync/pcsync/internal/lib/agentpod"
	"github.com/pcsync/pcsync/internal/testing/testcluster"
	"github.com/pcsync/pcsync/internal/testing/testnet"
	"github.com/pcsync/pcsync/pkg/config"
	"github.com/pcsync/pcsync/pkg/egressproxy/agentenv"
	"github.com/pcsync/pcsync/pkg/egressproxy/allow"
	"github.com/pcsync/pcsync/pkg/render"
	"github.com/pcsync/pcsync/pkg/runs/kubeexec"
	"github.com/pcsync/pcsync/pkg/runs/spool"
	"github.com/pcsync/pcsync/pkg/sandbox"
)

// proxyConnectScript runs in an agent's pod (pcsync's images have Node.js):
// for each host argument it sends a CONNECT host:443 to the proxy of
// HTTPS_PROXY (with its user info, as curl does), then a TLS handshake
// through the tunnel, and prints "proxy HOST: STATUS" and, when the tunnel
// opened, "tls HOST: ok|error".
const proxyConnectScript = `
const http = require('http'), tls = require('tls');
const u = new URL(process.env.HTTPS_PROXY);
const auth = 'Basic ' + Buffer.from(decodeURIComponent(u.username) + ':').toString('base64');
const one = host => new Promise(done => {
  const req = http.request({host: u.hostname, port: u.port, method: 'CONNECT', path: host + ':443',
    headers: {'Proxy-Authorization': auth}, timeout: 10000});
  req.on('connect', (res, sock) => {
    console.log('proxy ' + host + ': ' + res.statusCode);
    if (res.statusCode !== 200) { sock.destroy(); return done(); }
    const t = tls.connect({socket: sock, servername: host, rejectUnauthorized: false}, () => {
      console.log('tls ' + host + ': ok'); t.destroy(); done(); });
    t.on('error', e => { console.log('tls ' + host + ': error ' + e.code); done(); });
  });
  req.on('timeout', () => { console.log('proxy ' + host + ': timeout'); req.destroy(); done(); });
  req.on('error', e => { console.log('proxy ' + host + ': error ' + e.code); done(); });
  req.end();
});
(async () => { for (const h of process.argv.slice(1)) await one(h); })();
`

// TestProxyModeEnforced: a company in egress mode proxy, on the real node
// with the NetworkPolicy enforcer. Its Job's pod reaches allowed.test (a
// TLS server on the "public" 203.0.113.10:443 in the test's network
// namespace) through the tenant's egress proxy, and is refused other.test
// (the same address, not in the allow-list: the proxy refuses it) and the
// address itself without the proxy (the agents' policy refuses it). The
// proxy pod resolves both names through hostAliases that a company patch
// adds to its Deployment, as a user would write it, beside its node's
// nodeSelector and toleration. The refusal is in the proxy's log with the
// agent and the host. Neither the Job's pod nor a lease's has a DNS channel:
// the cluster's real DNS server (CoreDNS) does not answer them, and answers
// a control pod the same query (checkNoDNSChannel).
func TestProxyModeEnforced(t *testing.T) {
	c := testcluster.Get(t)
	node := c.RealNode()
	if !node.NetworkPolicy() {
		t.Fatal("the real node does not enforce NetworkPolicies: TestMain sets RealNodeOptions.NetworkPolicy")
	}
	p := pushImages(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	ns := c.Namespace(t, "proxy", nil)
	i := strings.LastIndexByte(ns, '-')
	slug := ns[i+1:]
	dir, spoolDir := t.TempDir(), t.TempDir()
	monNS := c.Namespace(t, "mon", nil)
	m := writeProxyConfig(t, dir, ns[:i+1], slug, monNS, p, node)
	applyTenant(ctx, t, c, m)

	tn := newTestNet(ctx, t)
	ln, err := tn.Listen("tcp4", testnet.PublicAddress+":443")
	if err != nil {
		t.Fatal(err)
	}
	srv, _, err := testnet.ServeHTTPS(ln, []string{"allowed.test", "other.test", testnet.PublicAddress},
		http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "public\n") }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	// The pod bridge exists once a pod runs on the node.
	proxyPod := waitRunning(ctx, t, c, ns, agentpod.LabelRole+"="+agentpod.RoleEgressProxy)
	if err := tn.Forward(node.PodBridge()); err != nil {
		t.Fatal(err)
	}
	if err := tn.CheckRoute(ctx, testnet.PublicAddress); err != nil {
		t.Fatalf("send nothing: %v", err)
	}
	addrs := agentenv.NewAddresses(c.Client())
	if err := addrs.Start(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	startProxyRun(t, c, m, addrs, slug, spoolDir)
	jobPod := waitRunning(ctx, t, c, ns, agentpod.LabelRunID)
	for _, pod := range []*corev1.Pod{proxyPod, jobPod} {
		if err := node.WaitFirewalled(ctx, ns, pod.Name); err != nil {
			t.Fatal(err)
		}
		if err := tn.CheckRouteFrom(ctx, testnet.PublicAddress, pod.Status.PodIP, node.PodBridge()); err != nil {
			t.Fatalf("send nothing: %v", err)
		}
	}

	env := map[string]string{}
	for _, v := range jobPod.Spec.Containers[0].Env {
		env[v.Name] = v.Value
	}
	ip, _ := addrs.ClusterIP(ns)
	if want := "http://pinned@" + ip + ":3128"; env["HTTPS_PROXY"] != want || env["https_proxy"] != want {
		t.Fatalf("the Job's HTTPS_PROXY %q, https_proxy %q; want %q", env["HTTPS_PROXY"], env["https_proxy"], want)
	}

	// kube-proxy programs the Service once its EndpointSlice is ready (a
	// Service without endpoints is refused): poll.
	var out string
	for deadline := time.Now().Add(45 * time.Second); ; time.Sleep(500 * time.Millisecond) {
		out, err = podExec(ctx, c, ns, jobPod.Name, jobPod.Spec.Containers[0].Name,
			[]string{"node", "-e", proxyConnectScript, "allowed.test", "other.test"})
		if err != nil {
			t.Fatalf("probe through the proxy: %v\n%s", err, out)
		}
		if !strings.Contains(out, "ECONNREFUSED") || time.Now().After(deadline) {
			break
		}
	}
	// The Service sends agents to ready proxies only: the kubelet's
	// probes of the proxy's ports pass with the enforcer on.
	pp, err := c.Client().CoreV1().Pods(ns).Get(ctx, proxyPod.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !podReady(pp) || pp.Spec.Containers[0].ReadinessProbe == nil || pp.Spec.Containers[0].LivenessProbe == nil {
		t.Errorf("proxy pod %s/%s: ready %v, readiness probe %v, liveness probe %v; want ready through both probes",
			ns, pp.Name, podReady(pp), pp.Spec.Containers[0].ReadinessProbe != nil, pp.Spec.Containers[0].LivenessProbe != nil)
	}
	for _, want := range []string{"proxy allowed.test: 200", "tls allowed.test: ok", "proxy other.test: 407"} {
		if !strings.Contains(out, want) {
			t.Errorf("through the proxy: want %q in the probe's output:\n%s", want, out)
		}
	}
	direct := "tcp:" + testnet.PublicAddress + ":443"
	dout, err := podExec(ctx, c, ns, jobPod.Name, jobPod.Spec.Containers[0].Name, nodeDial(direct))
	if err != nil {
		t.Fatalf("direct probe: %v\n%s", err, dout)
	}
	if got := parseDials(t, dout, []string{direct})[direct]; strings.HasPrefix(got, "ok") {
		t.Errorf("the agent reached %s without the proxy (%s); want its policy to refuse it", direct, got)
	}

	checkNoDNSChannel(ctx, t, c, jobPod, ip)
	checkLeaseThroughProxy(ctx, t, c, m, addrs, ns, slug)
	checkProxyIngress(ctx, t, c, proxyPod, jobPod, monNS)

	logs, err := c.Client().CoreV1().Pods(ns).GetLogs(proxyPod.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf(`msg="egress refused" company=%s agent=pinned host=other.test port=443 reason=host_not_allowed`, slug)
	if !strings.Contains(string(logs), want) {
		t.Errorf("the proxy's log lacks %s:\n%s", want, logs)
	}
}

// firewalledLease starts pcsync's sandbox Manager as the daemon runs it
// (told the egress proxy Services' addresses addrs) and acquires a lease
// of claude_local for the pinned agent of company slug, run runID; it
// returns them once the real node's firewall holds the lease's pod in
// namespace ns. The lease and the Manager end with t.
func firewalledLease(ctx context.Context, t *testing.T, c *testcluster.Cluster, model *config.Model,
	addrs *agentenv.Addresses, ns, slug, runID string) (*sandbox.Manager, sandbox.LeaseInfo) {
	t.Helper()
	o := sandbox.DefaultOptions(t.TempDir())
	o.Pool.Lease.Namespace = "default" // the pools' Lease: a namespace every cluster has
	o.ReadyTimeout = 3 * time.Minute
	o.Agents = agentIDs{pinnedAgentID: "pinned"}
	o.ProxyAddresses = addrs
	o.Logger = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
	m, err := sandbox.New(ctx, c.RESTConfig(), func() *config.Model { return model }, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	info, err := m.Acquire(ctx, sandbox.AcquireParams{Config: sandbox.EnvironmentConfig{Company: slug},
		AdapterType: "claude_local", AgentID: pinnedAgentID, RunID: runID})
	if err != nil {
		t.Fatalf("acquire: %v", err)
	}
	t.Cleanup(func() { _, _ = m.Release(context.Background(), sandbox.ReleaseParams{ID: info.ID, Cancel: true}) })
	if err := c.RealNode().WaitFirewalled(ctx, ns, info.ID); err != nil {
		t.Fatal(err)
	}
	return m, info
}

// checkLeaseThroughProxy acquires a lease of the company's agent through
// pcsync's sandbox Manager (given the proxy Services' addresses, as the
// daemon is) and runs the same probes through its execute: the execute's
// env points at the proxy, an allowed name is tunnelled, another refused,
// and the address itself without the proxy is refused by the policy.
func checkLeaseThroughProxy(ctx context.Context, t *testing.T, c *testcluster.Cluster, model *config.Model,
	addrs *agentenv.Addresses, ns, slug string) {
	t.Helper()
	m, info := firewalledLease(ctx, t, c, model, addrs, ns, slug, "proxy-lease")
	run := func(args ...string) string {
		t.Helper()
		r, err := m.Execute(ctx, sandbox.ExecParams{LeaseID: info.ID, Command: "node", Args: args, Timeout: time.Minute}, nil)
		if err != nil {
			t.Fatalf("execute in lease %s: %v", info.ID, err)
		}
		if r.ExitCode == nil || *r.ExitCode != 0 {
			t.Fatalf("execute in lease %s: exit %v: %s%s", info.ID, r.ExitCode, r.Stdout, r.Stderr)
		}
		return r.Stdout
	}
	ip, _ := addrs.ClusterIP(ns)
	if got, want := run("-e", "console.log(process.env.HTTPS_PROXY)"), "http://pinned@"+ip+":3128\n"; got != want {
		t.Errorf("the lease's HTTPS_PROXY: %q, want %q", got, want)
	}
	out := run("-e", proxyConnectScript, "allowed.test", "other.test")
	for _, want := range []string{"proxy allowed.test: 200", "tls allowed.test: ok", "proxy other.test: 407"} {
		if !strings.Contains(out, want) {
			t.Errorf("lease through the proxy: want %q in the probe's output:\n%s", want, out)
		}
	}
	direct := "tcp:" + testnet.PublicAddress + ":443"
	if got := parseDials(t, run(append([]string{"-e", nodeDialScript}, direct)...), []string{direct})[direct]; strings.HasPrefix(got, "ok") {
		t.Errorf("the lease reached %s without the proxy (%s); want its policy to refuse it", direct, got)
	}
	name, server := allow.ProxyName+"."+ns+".svc.cluster.local", clusterDNS(ctx, t, c)
	assertNoDNS(t, "lease "+info.ID, parseDNSProbe(run("-e", dnsProbeScript, name, server)), name, server)
}

// checkProxyIngress dials the proxy pod's ports from the metrics
// namespace (Settings spec.egress.metricsNamespace), from a namespace
// without policies and from the tenant's agent: only the metrics
// namespace reaches the metrics port, and only the agent the proxy port.
func checkProxyIngress(ctx context.Context, t *testing.T, c *testcluster.Cluster, proxyPod, jobPod *corev1.Pod, monNS string) {
	t.Helper()
	node := c.RealNode()
	metrics := fmt.Sprintf("tcp:%s:%d", proxyPod.Status.PodIP, render.EgressProxyMetricsPort)
	proxy := fmt.Sprintf("tcp:%s:%d", proxyPod.Status.PodIP, render.EgressProxyPort)
	ctlNS := c.Namespace(t, "ctl", nil)
	for _, tc := range []struct {
		ns, reaches, refused string
	}{{monNS, metrics, proxy}, {ctlNS, "", metrics}} {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "dialer"},
			Spec: podSpec(node, node.PauseImage(), []string{"/pause"}, corev1.RestartPolicyNever)}
		if _, err := c.Client().CoreV1().Pods(tc.ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create pod %s/dialer: %v", tc.ns, err)
		}
		got, err := waitPod(ctx, c.Client(), tc.ns, "dialer", func(p *corev1.Pod) bool { return p.Status.Phase != corev1.PodPending })
		if err != nil || got.Status.Phase != corev1.PodRunning {
			t.Fatalf("pod %s/dialer: %v %s", tc.ns, err, describe(got))
		}
		if err := node.WaitFirewalled(ctx, tc.ns, "dialer"); err != nil {
			t.Fatal(err)
		}
		specs := []string{metrics, proxy}
		out, err := podExec(ctx, c, tc.ns, "dialer", got.Spec.Containers[0].Name, pauseDial(specs...))
		if err != nil {
			t.Fatalf("dial from %s: %v\n%s", tc.ns, err, out)
		}
		dials := parseDials(t, out, specs)
		if tc.reaches != "" && !strings.HasPrefix(dials[tc.reaches], "ok") {
			t.Errorf("from %s, %s: %s; want the proxy's policy to let it in", tc.ns, tc.reaches, dials[tc.reaches])
		}
		for _, s := range specs {
			if s != tc.reaches && strings.HasPrefix(dials[s], "ok") {
				t.Errorf("from %s, %s: %s; want the proxy's policy to refuse it", tc.ns, s, dials[s])
			}
		}
	}
	out, err := podExec(ctx, c, jobPod.Namespace, jobPod.Name, jobPod.Spec.Containers[0].Name, nodeDial(metrics))
	if err != nil {
		t.Fatalf("dial from the agent: %v\n%s", err, out)
	}
	if got := parseDials(t, out, []string{metrics})[metrics]; strings.HasPrefix(got, "ok") {
		t.Errorf("the agent reached the proxy's metrics port %s (%s); want it refused", metrics, got)
	}
}

// writeProxyConfig writes and loads the config: one company in egress mode
// proxy (the default) allowing allowed.test, its agent and its proxy on
// the real node, the proxy resolving the test names through hostAliases.
func writeProxyConfig(t *testing.T, dir, prefix, slug, monNS string, p pushed, node *testcluster.RealNode) *config.Model {
	t.Helper()
	pl := placementOf(node)
	settings := testSettings(prefix, p.Registry, node, "{cpu: 200m, memory: 128Mi}", "  egress: {metricsNamespace: "+monNS+"}\n")
	company := fmt.Sprintf(`apiVersion: pcsync.io/v1alpha1
kind: Company
metadata: {name: %q}
spec:
  id: company-%s
  egress:
    allowFqdns: [allowed.test]
  agents:
%s  patches:
%s`, slug, slug, pl.Agent("name: pinned, adapter: claude_local"), proxyPatch(pl, []string{"allowed.test", "other.test"}, false, ""))
	for name, text := range map[string]string{"settings.yaml": settings, "company.yaml": company} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	m, err := loadConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	if m.EgressMode(&m.Companies[0]) != config.EgressProxy {
		t.Fatalf("egress mode %s, want proxy (the default)", m.EgressMode(&m.Companies[0]))
	}
	return m
}

// startProxyRun runs the company's agent through pcsync's Kubernetes
// executor with the proxy Services' watch (a run whose stand-in CLI
// sleeps), until the test ends.
func startProxyRun(t *testing.T, c *testcluster.Cluster, m *config.Model, addrs *agentenv.Addresses, slug, spoolDir string) {
	t.Helper()
	logger := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
	opts := kubeexec.DefaultOptions()
	opts.StateDir, opts.Logger, opts.ProxyAddresses = t.TempDir(), logger, addrs
	opts.Environ = func() []string { return []string{"ANTHROPIC_API_KEY=sk-ant-realnode-not-a-key", "PATH=/usr/bin"} }
	runCtx, cancel := context.WithCancel(context.Background())
	ex, err := kubeexec.New(runCtx, c.RESTConfig(), opts)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	do := spool.DefaultOptions(spoolDir)
	do.StateDir, do.Logger, do.RescanInterval = opts.StateDir, logger, 500*time.Millisecond
	d, err := spool.New(m, ex, do)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- d.Run(runCtx) }()
	t.Cleanup(func() { cancel(); <-done })
	run, _ := json.Marshal(map[string]any{"apiVersion": config.APIVersion, "kind": "Run", "company": slug,
		"agent": "pinned", "prompt": "no-handler: sleep while the test probes"})
	if err := os.WriteFile(filepath.Join(spoolDir, ".proxy.tmp"), run, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(spoolDir, ".proxy.tmp"), filepath.Join(spoolDir, "proxy.json")); err != nil {
		t.Fatal(err)
	}
}

// waitRunning waits up to 4 minutes for a Running pod with an IP in ns
// that selector selects.
func waitRunning(ctx context.Context, t testing.TB, c *testcluster.Cluster, ns, selector string) *corev1.Pod {
	t.Helper()
	deadline := time.Now().Add(4 * time.Minute)
	for {
		l, err := c.Client().CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			t.Fatal(err)
		}
		for i := range l.Items {
			if p := &l.Items[i]; p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "" {
				return p
			}
		}
		if time.Now().After(deadline) {
			var states []string
			for i := range l.Items {
				states = append(states, describe(&l.Items[i]))
			}
			t.Fatalf("no Running pod %s in %s after 4 minutes: %v", selector, ns, states)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// podReady reports whether pod's Ready condition is True.
func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
