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
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/pcsync/pcsync/internal/lib/agentpod"
	"github.com/pcsync/pcsync/internal/testing/testcluster"
	"github.com/pcsync/pcsync/internal/testing/testnet"
	"github.com/pcsync/pcsync/pkg/config"
	"github.com/pcsync/pcsync/pkg/egressproxy/agentenv"
	"github.com/pcsync/pcsync/pkg/result"
	"github.com/pcsync/pcsync/pkg/runs/kubeexec"
	"github.com/pcsync/pcsync/pkg/runs/spool"
)

// benchDownloadBytes is the size of the download the proxy benchmark
// fetches (50 MB).
const benchDownloadBytes = 50 << 20

// benchRelayPort is the bare CONNECT relay's port, on the proxy's pod and
// its Service: the pod's second container, `/pause -relay`, the floor of
// any proxy on the same hops.
const benchRelayPort = 3129

// httpsClientScript runs in an agent's pod (Node.js): MODE is "proxy" (a
// CONNECT to the proxy of HTTPS_PROXY with its user info, then TLS through
// the tunnel), "relay" (the same to the bare relay's port of that Service)
// or "direct" (TCP to ADDR:443, then TLS); each request is a
// new connection with Connection: close, as an agent's CLI without a pool
// would make. `small N`: N sequential GET / after one warm-up, one line
// "ms T bytes B" each. `big`: one GET /big, its line. `hold N`: N GET
// /hold at once, one line each once all ended.
var httpsClientScript = strings.ReplaceAll(`
const http = require('http'), net = require('net'), tls = require('tls');
const [mode, addr, host, op, n] = process.argv.slice(1);
const tunnel = () => new Promise((ok, fail) => {
  if (mode === 'direct') { const s = net.connect(443, addr, () => ok(s)); s.on('error', fail); return; }
  const u = new URL(process.env.HTTPS_PROXY);
  const auth = 'Basic ' + Buffer.from(decodeURIComponent(u.username) + ':').toString('base64');
  const port = mode === 'relay' ? RELAY_PORT : u.port;
  const req = http.request({host: u.hostname, port, method: 'CONNECT', path: host + ':443',
    headers: {'Proxy-Authorization': auth}, agent: false});
  req.on('connect', (res, sock) => res.statusCode === 200 ? ok(sock) : fail(new Error('proxy ' + res.statusCode)));
  req.on('error', fail);
  req.end();
});
const get = path => new Promise(async (ok, fail) => {
  const t0 = process.hrtime.bigint();
  let sock;
  try { sock = await tunnel(); } catch (e) { return fail(e); }
  const t = tls.connect({socket: sock, servername: host, rejectUnauthorized: false}, () =>
    t.write('GET ' + path + ' HTTP/1.1\r\nHost: ' + host + '\r\nConnection: close\r\n\r\n'));
  let bytes = 0;
  t.on('data', d => { bytes += d.length; });
  t.on('end', () => ok('ms ' + (Number(process.hrtime.bigint() - t0) / 1e6).toFixed(3) + ' bytes ' + bytes));
  t.on('error', fail);
});
(async () => {
  if (op === 'small') { await get('/'); for (let i = 0; i < +n; i++) console.log(await get('/')); }
  if (op === 'big') console.log(await get('/big'));
  if (op === 'hold') (await Promise.all(Array.from({length: +n}, () => get('/hold')))).forEach(l => console.log(l));
})().catch(e => { console.error(String(e)); process.exit(1); });
`, "RELAY_PORT", strconv.Itoa(benchRelayPort))

// proxyBenchEnv is the proxy benchmark's world: two companies on the real
// node with the enforcer, "px" in egress mode proxy allowing allowed.test
// and "dx" in mode standard allowing 203.0.113.10/32 on 443, each with a
// long run whose pod is the HTTPS client, and the network namespace's
// HTTPS server.
type proxyBenchEnv struct {
	c              *testcluster.Cluster
	node           *testcluster.RealNode
	spool          string
	slugPX, slugDX string
	nsPX, nsDX     string
	clientPX       *corev1.Pod
	clientDX       *corev1.Pod
	proxyPod       *corev1.Pod
	holds          *holdGate
}

// holdGate lets the test see when n GET /hold are in flight at once, and
// release them.
type holdGate struct {
	n       int32
	active  atomic.Int32
	reached chan struct{}
	release chan struct{}
	once    sync.Once
}

func newHoldGate(n int32) *holdGate {
	return &holdGate{n: n, reached: make(chan struct{}), release: make(chan struct{})}
}

func (g *holdGate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if g.active.Add(1) == g.n {
		close(g.reached)
	}
	select {
	case <-g.release:
	case <-r.Context().Done():
	}
	_, _ = io.WriteString(w, "held\n")
}

func (g *holdGate) Release() { g.once.Do(func() { close(g.release) }) }

// benchHandler serves / (a small body), /big (benchDownloadBytes of
// zeros) and /hold (holds).
func benchHandler(holds *holdGate) http.Handler {
	zeros := make([]byte, 1<<20)
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "public\n") })
	mux.HandleFunc("/big", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(benchDownloadBytes))
		for range benchDownloadBytes / len(zeros) {
			if _, err := w.Write(zeros); err != nil {
				return
			}
		}
	})
	mux.Handle("/hold", holds)
	return mux
}

// newProxyBenchEnv builds the world and waits until both clients and the
// proxy are Running, firewalled, and route to the target through the
// harness's own link only.
func newProxyBenchEnv(b *testing.B) *proxyBenchEnv {
	b.Helper()
	c := testcluster.Get(b)
	e := &proxyBenchEnv{c: c, node: c.RealNode(), spool: b.TempDir(), holds: newHoldGate(50)}
	if !e.node.NetworkPolicy() {
		b.Fatal("the real node does not enforce NetworkPolicies: TestMain sets RealNodeOptions.NetworkPolicy")
	}
	p := pushImages(b)
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	e.nsPX, e.nsDX = c.Namespace(b, "pxb", nil), c.Namespace(b, "pxb", nil)
	e.slugPX, e.slugDX = e.nsPX[strings.LastIndexByte(e.nsPX, '-')+1:], e.nsDX[strings.LastIndexByte(e.nsDX, '-')+1:]
	m := e.writeConfig(b, b.TempDir(), e.nsPX[:strings.LastIndexByte(e.nsPX, '-')+1], p)
	applyTenant(ctx, b, c, m)
	e.allowRelay(ctx, b)

	tn := newTestNet(ctx, b)
	ln, err := tn.Listen("tcp4", testnet.PublicAddress+":443")
	if err != nil {
		b.Fatal(err)
	}
	srv, _, err := testnet.ServeHTTPS(ln, []string{"allowed.test", testnet.PublicAddress}, benchHandler(e.holds))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { e.holds.Release(); _ = srv.Close() })
	e.proxyPod = benchWaitRunning(ctx, b, c, e.nsPX, agentpod.LabelRole+"="+agentpod.RoleEgressProxy)
	if err := tn.Forward(e.node.PodBridge()); err != nil {
		b.Fatal(err)
	}
	if err := tn.CheckRoute(ctx, testnet.PublicAddress); err != nil {
		b.Fatalf("send nothing: %v", err)
	}
	addrs := agentenv.NewAddresses(c.Client())
	if err := addrs.Start(ctx, time.Minute); err != nil {
		b.Fatal(err)
	}
	e.serve(b, m, addrs)
	e.drop(b, e.slugPX, "client-px")
	e.drop(b, e.slugDX, "client-dx")
	e.clientPX = benchWaitRunning(ctx, b, c, e.nsPX, agentpod.LabelRunID+"=client-px")
	e.clientDX = benchWaitRunning(ctx, b, c, e.nsDX, agentpod.LabelRunID+"=client-dx")
	for _, pod := range []*corev1.Pod{e.proxyPod, e.clientPX, e.clientDX} {
		if err := e.node.WaitFirewalled(ctx, pod.Namespace, pod.Name); err != nil {
			b.Fatal(err)
		}
		if err := tn.CheckRouteFrom(ctx, testnet.PublicAddress, pod.Status.PodIP, e.node.PodBridge()); err != nil {
			b.Fatalf("send nothing: %v", err)
		}
	}
	e.waitProxyService(ctx, b)
	return e
}

// writeConfig writes and loads the config of the two companies; the
// agents get up to a core each, so that the client's own CPU limit does
// not hide the proxy's cost.
func (e *proxyBenchEnv) writeConfig(b *testing.B, dir, prefix string, p pushed) *config.Model {
	b.Helper()
	pl := placementOf(e.node)
	agent := pl.Agent("name: pinned, adapter: claude_local, concurrency: 4, graceSec: 3")
	settings := testSettings(prefix, p.Registry, e.node, "{cpu: '1', memory: 256Mi}")
	px := fmt.Sprintf(`apiVersion: pcsync.io/v1alpha1
kind: Company
metadata: {name: %q}
spec:
  id: company-%s
  egress:
    mode: proxy
    allowFqdns: [allowed.test]
  agents:
%s  patches:
%s%s`, e.slugPX, e.slugPX, agent, proxyPatch(pl, []string{"allowed.test"}, false, relayContainerPatch(e.node.PauseImage())), relayServicePatch())
	dx := fmt.Sprintf("apiVersion: pcsync.io/v1alpha1\nkind: Company\nmetadata: {name: %q}\nspec:\n  id: company-%s\n"+
		"  egress:\n    mode: standard\n    allowCidrs: [{cidr: %s/32, ports: [443], protocol: TCP}]\n  agents:\n%s",
		e.slugDX, e.slugDX, testnet.PublicAddress, agent)
	for name, text := range map[string]string{"settings.yaml": settings, "px.yaml": px, "dx.yaml": dx} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	m, err := loadConfig(dir)
	if err != nil {
		b.Fatal(err)
	}
	return m
}

// serve runs the spool with pcsync's Kubernetes executor (and the proxy
// Services' watch) until the benchmark ends.
func (e *proxyBenchEnv) serve(b testing.TB, m *config.Model, addrs *agentenv.Addresses) {
	b.Helper()
	logger := slog.New(slog.DiscardHandler)
	opts := kubeexec.DefaultOptions()
	opts.StateDir, opts.Logger, opts.ProxyAddresses = b.TempDir(), logger, addrs
	opts.Environ = func() []string { return []string{"ANTHROPIC_API_KEY=sk-ant-realnode-not-a-key", "PATH=/usr/bin"} }
	runCtx, cancel := context.WithCancel(context.Background())
	ex, err := kubeexec.New(runCtx, e.c.RESTConfig(), opts)
	if err != nil {
		cancel()
		b.Fatal(err)
	}
	do := spool.DefaultOptions(e.spool)
	do.StateDir, do.Logger, do.RescanInterval = opts.StateDir, logger, 500*time.Millisecond
	d, err := spool.New(m, ex, do)
	if err != nil {
		cancel()
		b.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- d.Run(runCtx) }()
	b.Cleanup(func() { cancel(); <-done })
}

// drop writes a run of the company's agent that sleeps (the stand-in CLI
// without a handler), a hidden file renamed in.
func (e *proxyBenchEnv) drop(b testing.TB, slug, name string) {
	b.Helper()
	run, _ := json.Marshal(map[string]any{"apiVersion": config.APIVersion, "kind": "Run", "company": slug,
		"agent": "pinned", "prompt": "no-handler: sleep while the benchmark measures"})
	tmp := filepath.Join(e.spool, "."+name+".tmp")
	if err := os.WriteFile(tmp, run, 0o644); err != nil {
		b.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(e.spool, name+".json")); err != nil {
		b.Fatal(err)
	}
}

// cancelRun cancels the run and waits for its result.
func (e *proxyBenchEnv) cancelRun(b testing.TB, name string) {
	b.Helper()
	if err := os.WriteFile(filepath.Join(e.spool, name+".cancel"), nil, 0o644); err != nil {
		b.Fatal(err)
	}
	path := filepath.Join(e.spool, name+result.Suffix)
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
		if _, err := result.Read(path); err == nil {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("no result %s after 2 minutes", path)
		}
	}
}

// allowRelay lets the proxy company's agents reach the relay's port of
// the proxy's pod (the tenant's policies allow the proxy's port only); the
// relay's egress is the proxy pod's own.
func (e *proxyBenchEnv) allowRelay(ctx context.Context, b *testing.B) {
	b.Helper()
	port := intstr.FromInt32(benchRelayPort)
	tcp := corev1.ProtocolTCP
	proxy := metav1.LabelSelector{MatchLabels: map[string]string{agentpod.LabelRole: agentpod.RoleEgressProxy}}
	np := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "bench-relay", Namespace: e.nsPX},
		Spec: networkingv1.NetworkPolicySpec{
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &port}},
				From:  []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{}}},
			}},
			Egress: []networkingv1.NetworkPolicyEgressRule{{
				Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &port}},
				To:    []networkingv1.NetworkPolicyPeer{{PodSelector: &proxy}},
			}},
		},
	}
	if _, err := e.c.Client().NetworkingV1().NetworkPolicies(e.nsPX).Create(ctx, np, metav1.CreateOptions{}); err != nil {
		b.Fatalf("NetworkPolicy/%s/bench-relay: %v", e.nsPX, err)
	}
}

// waitProxyService waits until a request through the proxy, and one
// through the relay, succeeds:
// kube-proxy programs the proxy's Service once its EndpointSlice is ready.
func (e *proxyBenchEnv) waitProxyService(ctx context.Context, b *testing.B) {
	b.Helper()
	for _, mode := range []string{"proxy", "relay"} {
		var err error
		for deadline := time.Now().Add(45 * time.Second); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
			if _, err = e.client(ctx, e.clientPX, mode, "small", "1"); err == nil {
				break
			}
		}
		if err != nil {
			b.Fatalf("no request through the %s succeeded in 45 s: %v", mode, err)
		}
	}
}

// client runs httpsClientScript in pod and returns its lines' times, each
// checked to have a body.
func (e *proxyBenchEnv) client(ctx context.Context, pod *corev1.Pod, mode, op, n string) ([]time.Duration, error) {
	out, err := podExec(ctx, e.c, pod.Namespace, pod.Name, pod.Spec.Containers[0].Name,
		[]string{"node", "-e", httpsClientScript, mode, testnet.PublicAddress, "allowed.test", op, n})
	if err != nil {
		return nil, err
	}
	var ds []time.Duration
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var ms float64
		var bytes int
		if _, err := fmt.Sscanf(line, "ms %f bytes %d", &ms, &bytes); err != nil || bytes == 0 {
			return nil, fmt.Errorf("client in %s/%s: line %q of %q", pod.Namespace, pod.Name, line, out)
		}
		if op == "big" && bytes < benchDownloadBytes {
			return nil, fmt.Errorf("client in %s/%s: %d bytes, want over %d", pod.Namespace, pod.Name, bytes, benchDownloadBytes)
		}
		ds = append(ds, time.Duration(ms*float64(time.Millisecond)))
	}
	return ds, nil
}

// benchWaitRunning waits up to 4 minutes for a Running pod with an IP in
// ns that selector selects.
func benchWaitRunning(ctx context.Context, b *testing.B, c *testcluster.Cluster, ns, selector string) *corev1.Pod {
	b.Helper()
	for deadline := time.Now().Add(4 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
		l, err := c.Client().CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			b.Fatal(err)
		}
		for i := range l.Items {
			if p := &l.Items[i]; p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "" {
				return p
			}
		}
		if time.Now().After(deadline) {
			b.Fatalf("no Running pod %s in %s after 4 minutes", selector, ns)
		}
	}
}
