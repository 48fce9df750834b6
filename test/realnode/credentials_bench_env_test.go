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
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/pcsync/pcsync/internal/lib/agentpod"
	"github.com/pcsync/pcsync/internal/testing/testcluster"
	"github.com/pcsync/pcsync/internal/testing/testnet"
	"github.com/pcsync/pcsync/pkg/config"
	"github.com/pcsync/pcsync/pkg/egressproxy/agentenv"
	"github.com/pcsync/pcsync/pkg/egressproxy/inject"
	"github.com/pcsync/pcsync/pkg/egressproxy/tokensync"
)

// benchCredKey is the model key of the credential benchmark: in the
// tenant's Secret for the route, in the straight client's header for the
// peer. The stand-in answers 401 to any other.
const benchCredKey = "sk-ant-bench-key-of-the-stand-in"

// sseGap is the stand-in's pause before each content delta of its stream
// (sseDeltas of them), the same for the route and the straight peer.
const (
	sseGap    = 2 * time.Millisecond
	sseDeltas = 4
)

// sseStandIn is a stand-in Anthropic Messages API that streams: for a
// request with benchCredKey in x-api-key, the SSE events of a short
// message (message_start at once, each delta after sseGap), each flushed;
// any other key is counted in bad and refused with 401.
func sseStandIn(bad *atomic.Int64) http.Handler {
	ev := func(name, data string) string { return "event: " + name + "\ndata: " + data + "\n\n" }
	head := []string{
		ev("message_start", `{"type":"message_start","message":{"id":"msg_bench","type":"message","role":"assistant","model":"m","content":[],"usage":{"input_tokens":7,"output_tokens":1}}}`),
		ev("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`),
	}
	delta := ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"bench "}}`)
	tail := ev("content_block_stop", `{"type":"content_block_stop","index":0}`) +
		ev("message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":4}}`) +
		ev("message_stop", `{"type":"message_stop"}`)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("x-api-key") != benchCredKey {
			bad.Add(1)
			http.Error(w, `{"type":"error","error":{"type":"authentication_error"}}`, http.StatusUnauthorized)
			return
		}
		_, _ = io.Copy(io.Discard, r.Body)
		f, _ := w.(http.Flusher)
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Cache-Control", "no-cache")
		send := func(s string) {
			_, _ = io.WriteString(w, s)
			f.Flush()
		}
		send(head[0])
		send(head[1])
		for range sseDeltas {
			time.Sleep(sseGap)
			send(delta)
		}
		send(tail)
	})
}

// sseClientScript runs in the agent's pod (Node.js) and posts streamed
// Messages requests on one keep-alive connection, as a CLI does. MODE
// "route": to ANTHROPIC_BASE_URL (the proxy's credential route) with KEY
// or else ANTHROPIC_API_KEY (the run's token) in x-api-key; "straight":
// to ADDR:443 over TLS as api.anthropic.com, trusting CA, with KEY;
// "relay": the same through a CONNECT to the bare relay's port of the
// proxy's Service (the floor: the route's hop without its HTTP work).
// `ttfb N`: one warm-up request, then N, one line "ttfb T total U bytes
// B" each (ms from the request's start to its first body byte and to its
// end). `run N`: N requests on a new connection, then "whole T count N".
var sseClientScript = strings.ReplaceAll(`
const http = require('http'), https = require('https'), tls = require('tls');
const [mode, addr, ca, key, op, n] = process.argv.slice(1);
const body = JSON.stringify({model: 'm', max_tokens: 64, stream: true, messages: [{role: 'user', content: 'hi'}]});
const headers = {'x-api-key': key || process.env.ANTHROPIC_API_KEY, 'anthropic-version': '2023-06-01',
  'content-type': 'application/json', 'content-length': Buffer.byteLength(body), accept: 'text/event-stream'};
const tunnel = () => new Promise((ok, fail) => {
  const u = new URL(process.env.ANTHROPIC_BASE_URL);
  const req = http.request({host: u.hostname, port: RELAY_PORT, method: 'CONNECT', path: 'api.anthropic.com:443', agent: false});
  req.on('connect', (res, sock) => res.statusCode === 200 ? ok(sock) : fail(new Error('relay ' + res.statusCode)));
  req.on('error', fail);
  req.end();
});
let o;
if (mode === 'route') {
  const u = new URL(process.env.ANTHROPIC_BASE_URL + '/v1/messages');
  o = {mod: http, agent: new http.Agent({keepAlive: true, maxSockets: 1}), host: u.hostname, port: u.port, path: u.pathname};
} else if (mode === 'relay') {
  headers.host = 'api.anthropic.com';
  const agent = new https.Agent({keepAlive: true, maxSockets: 1});
  agent.createConnection = () => tls.connect({socket: o.sock, servername: 'api.anthropic.com', ca});
  o = {mod: https, agent, host: 'api.anthropic.com', port: 443, path: '/v1/messages'};
} else {
  headers.host = 'api.anthropic.com';
  o = {mod: https, agent: new https.Agent({keepAlive: true, maxSockets: 1}), host: addr, port: 443, path: '/v1/messages',
    servername: 'api.anthropic.com', ca};
}
const one = () => new Promise((ok, fail) => {
  const t0 = process.hrtime.bigint();
  let first = 0n, bytes = 0, text = '';
  const req = o.mod.request({agent: o.agent, host: o.host, port: o.port, path: o.path, method: 'POST', headers,
    servername: o.servername, ca: o.ca}, res => {
    res.on('data', d => { if (!first) first = process.hrtime.bigint(); bytes += d.length; text += d; });
    res.on('end', () => {
      if (res.statusCode !== 200 || !text.includes('event: message_stop')) return fail(new Error('status ' + res.statusCode + ' ' + text.slice(0, 200)));
      const end = process.hrtime.bigint();
      ok({ttfb: Number(first - t0) / 1e6, total: Number(end - t0) / 1e6, bytes});
    });
    res.on('error', fail);
  });
  req.on('error', fail);
  req.end(body);
});
(async () => {
  const t0 = process.hrtime.bigint();
  if (mode === 'relay') o.sock = await tunnel();
  if (op === 'ttfb') {
    await one();
    for (let i = 0; i < +n; i++) { const r = await one(); console.log('ttfb ' + r.ttfb.toFixed(3) + ' total ' + r.total.toFixed(3) + ' bytes ' + r.bytes); }
  }
  if (op === 'run') {
    for (let i = 0; i < +n; i++) await one();
    console.log('whole ' + (Number(process.hrtime.bigint() - t0) / 1e6).toFixed(3) + ' count ' + n);
  }
  o.agent.destroy();
})().catch(e => { console.error(String(e)); process.exit(1); });
`, "RELAY_PORT", strconv.Itoa(benchRelayPort))

// credBenchEnv is the credential benchmark's world: one company in egress
// mode proxy with an anthropic credential, on the real node with the
// enforcer; a long run whose pod is the client, allowed (by a
// NetworkPolicy of the benchmark's) to reach the stand-in straight too;
// the stand-in in the test's network namespace (203.0.113.10:443, as
// api.anthropic.com through the proxy pod's hostAliases).
type credBenchEnv struct {
	c          *testcluster.Cluster
	node       *testcluster.RealNode
	ns, slug   string
	proxyPod   *corev1.Pod
	client     *corev1.Pod
	caPEM      string
	bad        *atomic.Int64
	stopTokens context.CancelFunc
}

// newCredBenchEnv builds the world and waits until a streamed request
// succeeds both ways.
func newCredBenchEnv(b *testing.B) *credBenchEnv {
	b.Helper()
	c := testcluster.Get(b)
	e := &credBenchEnv{c: c, node: c.RealNode(), bad: &atomic.Int64{}}
	if !e.node.NetworkPolicy() {
		b.Fatal("the real node does not enforce NetworkPolicies: TestMain sets RealNodeOptions.NetworkPolicy")
	}
	p := pushImages(b)
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	e.ns = c.Namespace(b, "crb", nil)
	i := strings.LastIndexByte(e.ns, '-')
	e.slug = e.ns[i+1:]
	tn := newTestNet(ctx, b)
	ln, err := tn.Listen("tcp4", testnet.PublicAddress+":443")
	if err != nil {
		b.Fatal(err)
	}
	srv, caPEM, err := testnet.ServeHTTPSPEM(ln, []string{"api.anthropic.com"}, sseStandIn(e.bad))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = srv.Close() })
	e.caPEM = string(caPEM)
	e.createSecrets(ctx, b)
	m := e.writeConfig(b, b.TempDir(), e.ns[:i+1], p)
	applyTenant(ctx, b, c, m)
	e.allowStraight(ctx, b)
	(&proxyBenchEnv{c: c, nsPX: e.ns}).allowRelay(ctx, b)
	e.proxyPod = benchWaitRunning(ctx, b, c, e.ns, agentpod.LabelRole+"="+agentpod.RoleEgressProxy)
	if err := tn.Forward(e.node.PodBridge()); err != nil {
		b.Fatal(err)
	}
	if err := tn.CheckRoute(ctx, testnet.PublicAddress); err != nil {
		b.Fatalf("send nothing: %v", err)
	}
	e.startRun(ctx, b, m)
	for _, pod := range []*corev1.Pod{e.proxyPod, e.client} {
		if err := e.node.WaitFirewalled(ctx, pod.Namespace, pod.Name); err != nil {
			b.Fatal(err)
		}
		if err := tn.CheckRouteFrom(ctx, testnet.PublicAddress, pod.Status.PodIP, e.node.PodBridge()); err != nil {
			b.Fatalf("send nothing: %v", err)
		}
	}
	e.waitReady(ctx, b, "")
	return e
}

// createSecrets creates the credential's Secret and the stand-in's CA,
// which the proxy trusts.
func (e *credBenchEnv) createSecrets(ctx context.Context, b *testing.B) {
	b.Helper()
	cs := e.c.Client()
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "model-keys"}, StringData: map[string]string{"anthropic": benchCredKey}}
	if _, err := cs.CoreV1().Secrets(e.ns).Create(ctx, sec, metav1.CreateOptions{}); err != nil {
		b.Fatalf("Secret/%s/model-keys: %v", e.ns, err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "test-ca"}, Data: map[string]string{"ca.pem": e.caPEM}}
	if _, err := cs.CoreV1().ConfigMaps(e.ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		b.Fatalf("ConfigMap/%s/test-ca: %v", e.ns, err)
	}
}

// startRun syncs the tokens (until stopTokens), and runs the spool with
// pcsync's Kubernetes executor (the proxy benchmark's) and one long run,
// the client.
func (e *credBenchEnv) startRun(ctx context.Context, b *testing.B, m *config.Model) {
	b.Helper()
	cs := e.c.Client()
	addrs := agentenv.NewAddresses(cs)
	if err := addrs.Start(ctx, time.Minute); err != nil {
		b.Fatal(err)
	}
	tokCtx, stop := context.WithCancel(context.Background())
	b.Cleanup(stop)
	e.stopTokens = stop
	if err := tokensync.New(cs, tokensync.Options{Logger: slog.New(slog.DiscardHandler)}).Run(tokCtx); err != nil {
		b.Fatal(err)
	}
	runs := &proxyBenchEnv{c: e.c, spool: b.TempDir()}
	runs.serve(b, m, addrs)
	runs.drop(b, e.slug, "bench-client")
	e.client = benchWaitRunning(ctx, b, e.c, e.ns, agentpod.LabelRunID+"=bench-client")
}

// writeConfig writes and loads the config: the company with its
// credential, its agent (up to a core, so that the client's own CPU limit
// does not hide the route's cost) and its proxy on the real node, the
// proxy resolving api.anthropic.com to the stand-in and trusting its CA;
// beside the proxy, the proxy benchmark's bare relay to the stand-in.
func (e *credBenchEnv) writeConfig(b *testing.B, dir, prefix string, p pushed) *config.Model {
	b.Helper()
	pl := placementOf(e.node)
	settings := testSettings(prefix, p.Registry, e.node, "{cpu: '1', memory: 256Mi}")
	company := fmt.Sprintf(`apiVersion: pcsync.io/v1alpha1
kind: Company
metadata: {name: %q}
spec:
  id: company-%s
  credentials:
    - {name: claude, provider: anthropic, secretRef: {name: model-keys, key: anthropic}}
  agents:
%s  patches:
%s%s`, e.slug, e.slug, pl.Agent("name: pinned, adapter: claude_local, concurrency: 2, graceSec: 3"),
		proxyPatch(pl, []string{"api.anthropic.com"}, true, relayContainerPatch(e.node.PauseImage())), relayServicePatch())
	for name, text := range map[string]string{"settings.yaml": settings, "company.yaml": company} {
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

// allowStraight lets the company's agents reach the stand-in's address on
// 443 without the proxy: the straight peer, from the same pod.
func (e *credBenchEnv) allowStraight(ctx context.Context, b *testing.B) {
	b.Helper()
	port := intstr.FromInt32(443)
	tcp := corev1.ProtocolTCP
	np := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "bench-straight", Namespace: e.ns},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{agentpod.LabelRole: agentpod.RoleAgent}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
			Egress: []networkingv1.NetworkPolicyEgressRule{{
				Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &port}},
				To:    []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: testnet.PublicAddress + "/32"}}},
			}},
		},
	}
	if _, err := e.c.Client().NetworkingV1().NetworkPolicies(e.ns).Create(ctx, np, metav1.CreateOptions{}); err != nil {
		b.Fatalf("NetworkPolicy/%s/bench-straight: %v", e.ns, err)
	}
}

// waitReady waits until a streamed request succeeds through the route
// with token (the run's when "": the proxy's Service is programmed, and
// the token reaches the proxy's annotations file, a moment after the pod
// runs), through the relay and straight.
func (e *credBenchEnv) waitReady(ctx context.Context, b *testing.B, token string) {
	b.Helper()
	for _, mode := range credModes {
		var err error
		for deadline := time.Now().Add(90 * time.Second); time.Now().Before(deadline); time.Sleep(time.Second) {
			if _, err = e.clientRun(ctx, mode, token, "ttfb", 1); err == nil {
				break
			}
		}
		if err != nil {
			b.Fatalf("no streamed request %s succeeded in 90 s: %v", mode, err)
		}
	}
}

// sseTimes are the client's figures: per request (ttfb) or per run (run).
type sseTimes struct {
	ttfb, total, whole []time.Duration
}

// clientRun runs sseClientScript in the client's pod and parses its
// lines. key "" is the run's token for the route; the straight and relay
// clients always send the credential's key.
func (e *credBenchEnv) clientRun(ctx context.Context, mode, key, op string, n int) (sseTimes, error) {
	if mode != "route" {
		key = benchCredKey
	}
	out, err := podExec(ctx, e.c, e.ns, e.client.Name, e.client.Spec.Containers[0].Name,
		[]string{"node", "-e", sseClientScript, mode, testnet.PublicAddress, e.caPEM, key, op, fmt.Sprint(n)})
	if err != nil {
		return sseTimes{}, fmt.Errorf("client %s in %s/%s: %w: %s\nthe proxy's log: %s", mode, e.ns, e.client.Name, err, out, e.proxyLog(ctx))
	}
	ms := func(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }
	var t sseTimes
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var a, c float64
		var k int
		switch {
		case op == "ttfb":
			if _, err := fmt.Sscanf(line, "ttfb %f total %f bytes %d", &a, &c, &k); err != nil || k == 0 {
				return sseTimes{}, fmt.Errorf("client %s in %s/%s: line %q of %q", mode, e.ns, e.client.Name, line, out)
			}
			t.ttfb, t.total = append(t.ttfb, ms(a)), append(t.total, ms(c))
		default:
			if _, err := fmt.Sscanf(line, "whole %f count %d", &a, &k); err != nil || k != n {
				return sseTimes{}, fmt.Errorf("client %s in %s/%s: line %q of %q", mode, e.ns, e.client.Name, line, out)
			}
			t.whole = append(t.whole, ms(a))
		}
	}
	if n := e.bad.Load(); n > 0 {
		return sseTimes{}, fmt.Errorf("the stand-in refused %d requests without the credential's key", n)
	}
	return t, nil
}

// proxyLog is the end of the proxy container's log, and its restarts.
func (e *credBenchEnv) proxyLog(ctx context.Context) string {
	tail := int64(30)
	raw, err := e.c.Client().CoreV1().Pods(e.ns).GetLogs(e.proxyPod.Name, &corev1.PodLogOptions{Container: proxyContainer, TailLines: &tail}).DoRaw(ctx)
	if err != nil {
		return err.Error()
	}
	restarts := int32(-1)
	if pod, err := e.c.Client().CoreV1().Pods(e.ns).Get(ctx, e.proxyPod.Name, metav1.GetOptions{}); err == nil {
		for _, st := range pod.Status.ContainerStatuses {
			if st.Name == proxyContainer {
				restarts = st.RestartCount
			}
		}
	}
	return fmt.Sprintf("(%d restarts)\n%s", restarts, raw)
}

// addTokens stops the token sync and adds n live tokens of the client's
// address to the proxy pod's annotations (tokensync's format), and
// returns the last, once the proxy takes it.
func (e *credBenchEnv) addTokens(ctx context.Context, b *testing.B, n int) string {
	b.Helper()
	e.stopTokens()
	patch := map[string]any{}
	last := ""
	for range n {
		tok, err := inject.NewToken()
		if err != nil {
			b.Fatal(err)
		}
		h := agentpod.TokenHash(tok)
		patch[inject.AnnotationKey(h)] = h + " " + e.client.Status.PodIP
		last = tok
	}
	body, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": patch}})
	if _, err := e.c.Client().CoreV1().Pods(e.ns).Patch(ctx, e.proxyPod.Name, types.MergePatchType, body, metav1.PatchOptions{}); err != nil {
		b.Fatalf("Pod/%s/%s: token annotations: %v", e.ns, e.proxyPod.Name, err)
	}
	e.waitReady(ctx, b, last)
	return last
}

// rss is the proxy container's resident memory in MiB (the proxy
// benchmark's reading).
func (e *credBenchEnv) rss(ctx context.Context, b *testing.B) float64 {
	b.Helper()
	return (&proxyBenchEnv{c: e.c, nsPX: e.ns, proxyPod: e.proxyPod}).proxyRSS(ctx, b)
}

// cpu is a container of the proxy's pod's CPU time and throttling (the
// proxy benchmark's reading).
func (e *credBenchEnv) cpu(ctx context.Context, b *testing.B, container string) proxyCPU {
	b.Helper()
	return (&proxyBenchEnv{c: e.c, nsPX: e.ns, proxyPod: e.proxyPod}).proxyCPU(ctx, b, container)
}

// cpuUserSys is the proxy container's CPU time in user and kernel mode
// (cgroup v1: cpuacct.usage_user, cpuacct.usage_sys), in ns.
type cpuUserSys struct{ user, sys int64 }

func (e *credBenchEnv) cpuSplit(ctx context.Context, b *testing.B) cpuUserSys {
	b.Helper()
	proc := (&proxyBenchEnv{c: e.c, nsPX: e.ns, proxyPod: e.proxyPod}).proxyProcs(ctx, b, proxyContainer)[0]
	raw, err := os.ReadFile(filepath.Join(proc, "cgroup"))
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) == 3 && slices.Contains(strings.Split(f[1], ","), "cpuacct") {
			dir := filepath.Join(cgroupV1Dir("cpuacct"), f[2])
			return cpuUserSys{user: readInt(b, filepath.Join(dir, "cpuacct.usage_user")), sys: readInt(b, filepath.Join(dir, "cpuacct.usage_sys"))}
		}
	}
	b.Fatalf("%s: no cpuacct cgroup", proc)
	return cpuUserSys{}
}
