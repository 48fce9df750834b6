//go:build integration

package realnode

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"

	"github.com/pcsync/pcsync/internal/lib/agentpod"
	"github.com/pcsync/pcsync/internal/testing/testcluster"
	"github.com/pcsync/pcsync/internal/testing/testnet"
	"github.com/pcsync/pcsync/pkg/config"
	"github.com/pcsync/pcsync/pkg/egressproxy/agentenv"
	"github.com/pcsync/pcsync/pkg/egressproxy/allow"
	"github.com/pcsync/pcsync/pkg/egressproxy/scale"
	"github.com/pcsync/pcsync/pkg/egressproxy/tokensync"
	"github.com/pcsync/pcsync/pkg/sandbox"
)

// callModelScript is the stand-in CLI's one Messages request (prompt
// call-model): to ANTHROPIC_BASE_URL (the proxy's credential route) with
// ANTHROPIC_API_KEY (the run's token), without a retry; it prints "status
// CODE BODY" or "error MESSAGE".
const callModelScript = `
const http = require('http');
const u = new URL(process.env.ANTHROPIC_BASE_URL + '/v1/messages');
const req = http.request({host: u.hostname, port: u.port, path: u.pathname, method: 'POST',
  headers: {'x-api-key': process.env.ANTHROPIC_API_KEY, 'content-type': 'application/json', 'anthropic-version': '2023-06-01'}}, res => {
  let d = ''; res.on('data', c => d += c); res.on('end', () => console.log('status ' + res.statusCode + ' ' + d));
});
req.on('error', e => console.log('error ' + e.message));
req.end(JSON.stringify({model: 'm', max_tokens: 1, messages: [{role: 'user', content: 'hi'}]}));
`

// zeroEnv is a company in egress mode proxy with a credential, on the
// real node with the enforcer, its proxy scaled by the daemon's scaler
// (idle: its idle period, 2 s to start with) and its runs served by the
// Kubernetes executor with the scaler, as the daemon runs them.
type zeroEnv struct {
	*runEnv
	provider *provider
	scale    *scale.Controller
	idle     *atomic.Int64
}

func newZeroEnv(ctx context.Context, t testing.TB) *zeroEnv {
	t.Helper()
	c := testcluster.Get(t)
	node := c.RealNode()
	if !node.NetworkPolicy() {
		t.Fatal("the real node does not enforce NetworkPolicies: TestMain sets RealNodeOptions.NetworkPolicy")
	}
	p := pushImages(t)
	cs := c.Client()
	ns := c.Namespace(t, "zero", nil)
	i := strings.LastIndexByte(ns, '-')
	prefix, slug := ns[:i+1], ns[i+1:]
	z := &zeroEnv{provider: standInProvider(ctx, t), idle: new(atomic.Int64)}
	for _, obj := range []any{
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "model-keys"}, StringData: map[string]string{"anthropic": credKey}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "test-ca"}, Data: map[string]string{"ca.pem": z.provider.caPEM}},
	} {
		createIn(ctx, t, cs, ns, obj)
	}
	e := &runEnv{t: t, c: c, slug: slug, ns: ns, agent: "pinned", cfgDir: t.TempDir(), spool: t.TempDir()}
	e.model = writeCredentialConfig(t, e.cfgDir, prefix, slug, p, node)
	applyTenant(ctx, t, c, e.model)
	// The pod bridge is there once a pod of the node runs: the proxy's,
	// which starts with its Deployment.
	waitRunning(ctx, t, c, ns, agentpod.LabelRole+"="+agentpod.RoleEgressProxy)
	if err := z.provider.net.Forward(node.PodBridge()); err != nil {
		t.Fatal(err)
	}
	addrs := agentenv.NewAddresses(cs)
	if err := addrs.Start(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := tokensync.New(cs, tokensync.Options{}).Run(ctx); err != nil {
		t.Fatal(err)
	}
	z.idle.Store(int64(2 * time.Second))
	z.scale = startScaler(ctx, t, cs, func(n string) (time.Duration, bool) { return time.Duration(z.idle.Load()), n == ns })
	e.addrs, e.scale = addrs, z.scale
	e.serve()
	z.runEnv = e
	return z
}

// TestProxyFromZero: on the real node with the enforcer, a company in
// egress mode proxy with a credential, its proxy scaled by the daemon's
// scaler (idle period 2 s). Idle, the company holds no pod and its quota
// counts no CPU or memory. A run dropped then brings the proxy up while its
// own pod starts; its CLI's first and only request reaches the stand-in
// provider with the credential's key (no retry: a refused first request
// fails the run). The proxy goes back to zero after the run, and a lease
// from zero gets it too. Then warm runs: the proxy up past its wake, each
// run's pod new, whose first request would race the enforcer's rules for
// that pod (kube-router programs them from the pod's event) but for pcsync
// init's grace.
func TestProxyFromZero(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	z := newZeroEnv(ctx, t)
	cs := z.c.Client()
	asleep := waitIdle(ctx, t, cs, z.ns)
	t.Logf("idle company: its proxy scaled to 0 %s after the scaler started; 0 pods, quota used %s", asleep.took.Round(time.Millisecond), asleep.used)

	cold := dropAndWait(t, z.runEnv, "from-zero")
	if !strings.Contains(cold.log, "waiting for the egress proxy") {
		t.Logf("the run's pod found its proxy ready (no wait in its log)")
	}
	z.provider.assertKey(t, credKey)
	waitIdle(ctx, t, cs, z.ns)
	checkLeaseFromZero(ctx, t, z)
	waitIdle(ctx, t, cs, z.ns)
	checkWarmRuns(ctx, t, z)
	z.idle.Store(int64(2 * time.Second))
	waitIdle(ctx, t, cs, z.ns)

	t.Logf("drop → result with the proxy from zero: %s (BenchmarkProxyFromZero times it against warm runs)", cold.took.Round(time.Millisecond))
}

// checkWarmRuns: with the proxy kept up and past its wake, runs whose
// pods are new (each its own) get their CLI's first and only request
// through (a refusal fails the run), as pcsync init waits for the proxy's
// first answer, at most its grace.
func checkWarmRuns(ctx context.Context, t *testing.T, z *zeroEnv) {
	t.Helper()
	z.idle.Store(0)
	z.scale.Need(z.ns)
	if err := z.scale.Ready(ctx, z.ns); err != nil {
		t.Fatal(err)
	}
	time.Sleep(zeroNeedFor) // past its wake: a run now finds it warm
	for i := range 3 {
		r := dropAndWait(t, z.runEnv, fmt.Sprintf("warm-%d", i))
		if strings.Contains(r.log, "its company's proxy is starting") {
			t.Errorf("warm run %d waited for a proxy waking from zero:\n%s", i, r.log)
		}
		waited := strings.Contains(r.log, "waiting for the egress proxy")
		t.Logf("warm run %d: drop → result %s; its pod waited for its egress: %v", i, r.took.Round(time.Millisecond), waited)
	}
	z.provider.assertKey(t, credKey)
}

// checkLeaseFromZero: a lease of the idle company (the sandbox Manager
// with the scaler, as the daemon runs it) brings the proxy up and waits
// for it from its pod before its acquire returns; its first execute's
// first request gets the credential route's answer with the key, and a
// host the company does not allow is refused (407), as a warm proxy does.
func checkLeaseFromZero(ctx context.Context, t *testing.T, z *zeroEnv) {
	t.Helper()
	o := sandbox.DefaultOptions(t.TempDir())
	o.Pool.Lease.Namespace = "default"
	o.ReadyTimeout = 3 * time.Minute
	o.Agents = agentIDs{pinnedAgentID: "pinned"}
	o.ProxyAddresses, o.ProxyScale = z.addrs, z.scale
	o.Logger = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
	m, err := sandbox.New(ctx, z.c.RESTConfig(), func() *config.Model { return z.model }, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	began := time.Now()
	info, err := m.Acquire(ctx, sandbox.AcquireParams{Config: sandbox.EnvironmentConfig{Company: z.slug},
		AdapterType: "claude_local", AgentID: pinnedAgentID, RunID: "zero-lease"})
	if err != nil {
		t.Fatalf("acquire with the proxy at zero: %v", err)
	}
	t.Logf("lease acquired with its proxy from zero in %s", time.Since(began).Round(time.Millisecond))
	defer func() { _, _ = m.Release(context.Background(), sandbox.ReleaseParams{ID: info.ID, Cancel: true}) }()
	run := func(env map[string]string, args ...string) string {
		t.Helper()
		r, err := m.Execute(ctx, sandbox.ExecParams{LeaseID: info.ID, Command: "node", Args: args, Env: env, Timeout: time.Minute}, nil)
		if err != nil {
			t.Fatalf("execute in lease %s: %v", info.ID, err)
		}
		return r.Stdout
	}
	before := z.provider.count()
	// The first execute's first request: the credential route, answered
	// with the key (the control that the proxy is reached); then a host
	// the company does not allow, refused by the same proxy.
	env := map[string]string{"ANTHROPIC_API_KEY": paperclipKey, "ANTHROPIC_BASE_URL": "https://api.anthropic.com"}
	if out := run(env, "-e", anthropicCallScript); !strings.HasPrefix(out, "status 200") || z.provider.count() == before {
		t.Errorf("the lease's first request, through the credential route of its proxy from zero: %s", out)
	}
	if out := run(nil, "-e", proxyConnectScript, "other.test"); !strings.Contains(out, "proxy other.test: 407") {
		t.Errorf("a host the company does not allow, through its proxy from zero: want 407 in:\n%s", out)
	}
	z.provider.assertKey(t, credKey)
}

// BenchmarkProxyFromZero: a run's drop → result on the real node when its
// company's proxy was scaled to zero (the first run after an idle period),
// against the same run with the proxy warm, proxyZeroSamples of each.
func BenchmarkProxyFromZero(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	z := newZeroEnv(ctx, b)
	cs := z.c.Client()
	var cold, warm []time.Duration
	for i := range proxyZeroSamples {
		z.idle.Store(int64(2 * time.Second))
		waitIdle(ctx, b, cs, z.ns)
		relistJitter()
		cold = append(cold, dropAndWait(b, z.runEnv, fmt.Sprintf("cold-%d", i)).took)
	}
	z.idle.Store(0)
	z.scale.Need(z.ns)
	if err := z.scale.Ready(ctx, z.ns); err != nil {
		b.Fatal(err)
	}
	time.Sleep(zeroNeedFor) // past its wake
	for i := range proxyZeroSamples {
		relistJitter()
		warm = append(warm, dropAndWait(b, z.runEnv, fmt.Sprintf("warm-%d", i)).took)
	}
	reportOne(b, "drop → result, the first run after an idle period (proxy from zero) against warm", cold, warm)
}

// zeroNeedFor is the scaler's NeedFor in these tests.
const zeroNeedFor = 30 * time.Second

// proxyZeroSamples is how many runs BenchmarkProxyFromZero times each way:
// the kubelet's relist adds 0–1 s at random to each.
const proxyZeroSamples = 5

// provider is the stand-in Anthropic API (TLS, api.anthropic.com, in the
// test's network namespace) and the x-api-key of each request it got.
type provider struct {
	net   *testnet.Net
	caPEM string
	mu    sync.Mutex
	keys  []string
}

func standInProvider(ctx context.Context, t testing.TB) *provider {
	t.Helper()
	p := &provider{net: newTestNet(ctx, t)}
	ln, err := p.net.Listen("tcp4", testnet.PublicAddress+":443")
	if err != nil {
		t.Fatal(err)
	}
	srv, caPEM, err := testnet.ServeHTTPSPEM(ln, []string{"api.anthropic.com"}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		p.keys = append(p.keys, r.Header.Get("x-api-key"))
		p.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"type":"message","usage":{"input_tokens":7,"output_tokens":1}}`)
	}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	p.caPEM = string(caPEM)
	return p
}

// count is how many requests the provider got.
func (p *provider) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.keys)
}

// assertKey checks that the provider's last request carried key.
func (p *provider) assertKey(t testing.TB, key string) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.keys) == 0 || p.keys[len(p.keys)-1] != key {
		t.Errorf("the provider's requests' keys: %d requests, the last with the credential's key: %v", len(p.keys), len(p.keys) > 0 && p.keys[len(p.keys)-1] == key)
	}
}

func createIn(ctx context.Context, t testing.TB, cs kubernetes.Interface, ns string, obj any) {
	t.Helper()
	var err error
	switch o := obj.(type) {
	case *corev1.Secret:
		_, err = cs.CoreV1().Secrets(ns).Create(ctx, o, metav1.CreateOptions{})
	case *corev1.ConfigMap:
		_, err = cs.CoreV1().ConfigMaps(ns).Create(ctx, o, metav1.CreateOptions{})
	default:
		err = fmt.Errorf("createIn: %T", obj)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// startScaler runs the daemon's proxy scaler on a pod informer of
// pcsync's pods, as the daemon does, until ctx ends.
func startScaler(ctx context.Context, t testing.TB, cs kubernetes.Interface, idle scale.IdleFunc) *scale.Controller {
	t.Helper()
	f := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.LabelSelector = agentpod.LabelManagedBy + "=" + agentpod.ManagedByValue
	}))
	pods := f.Core().V1().Pods().Informer()
	opts := scale.DefaultOptions()
	opts.Idle = idle
	// A woken proxy counts as waking for NeedFor: short here, so that the
	// warm figures are of a proxy that is warm.
	opts.NeedFor = zeroNeedFor
	opts.Logger = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	sc, err := scale.New(cs, pods, opts)
	if err != nil {
		t.Fatal(err)
	}
	f.Start(ctx.Done())
	t.Cleanup(f.Shutdown)
	if err := sc.Run(ctx); err != nil {
		t.Fatal(err)
	}
	return sc
}

// idleState is what waitIdle saw.
type idleState struct {
	took time.Duration
	used string
}

// waitIdle waits until ns's proxy is scaled to zero and ns holds no pod
// that has not finished, and checks that its quota counts no pod, CPU or
// memory.
func waitIdle(ctx context.Context, t testing.TB, cs kubernetes.Interface, ns string) idleState {
	t.Helper()
	start := time.Now()
	var last string
	for deadline := start.Add(2 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
		d, err := cs.AppsV1().Deployments(ns).Get(ctx, allow.ProxyName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		// A finished run's pod stays (Succeeded) until its Job's TTL: it
		// holds nothing, and its quota counts it no more.
		live := 0
		for _, p := range pods.Items {
			if p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
				live++
			}
		}
		last = fmt.Sprintf("replicas %v, %d pods not finished", *d.Spec.Replicas, live)
		if *d.Spec.Replicas == 0 && live == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not idle after 2 min: %s", ns, last)
		}
	}
	took := time.Since(start)
	var used []string
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		quotas, err := cs.CoreV1().ResourceQuotas(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		used = used[:0]
		busy := len(quotas.Items) == 0
		for _, q := range quotas.Items {
			for name, v := range q.Status.Used {
				if strings.Contains(string(name), "cpu") || strings.Contains(string(name), "memory") || name == corev1.ResourcePods {
					used = append(used, fmt.Sprintf("%s=%s", name, v.String()))
					busy = busy || !v.IsZero()
				}
			}
		}
		if !busy {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s holds no pod, but its quota counts %v (or it has no quota)", ns, used)
		}
	}
	return idleState{took: took, used: strings.Join(used, " ")}
}

// dropped is one run's result and its drop → result.
type dropped struct {
	took time.Duration
	log  string
}

// dropAndWait drops a call-model run and waits for its result, which must
// be a success.
func dropAndWait(t testing.TB, e *runEnv, name string) dropped {
	t.Helper()
	begin := time.Now()
	e.drop(name, "call-model", nil)
	r := e.result(name)
	took := time.Since(begin)
	log := e.log(name)
	if r.Status != "succeeded" {
		t.Fatalf("run %s: %s (%s: %s), want succeeded\n%s", name, r.Status, deref(r.ErrorCode), deref(r.ErrorMessage), log)
	}
	return dropped{took: took, log: log}
}
