//go:build integration

package realnode

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pcsync/pcsync/internal/lib/agentpod"
	"github.com/pcsync/pcsync/internal/testing/testcluster"
	"github.com/pcsync/pcsync/internal/testing/testnet"
	"github.com/pcsync/pcsync/pkg/config"
	"github.com/pcsync/pcsync/pkg/egressproxy/agentenv"
	"github.com/pcsync/pcsync/pkg/egressproxy/tokensync"
	"github.com/pcsync/pcsync/pkg/sandbox"
)

// credKey is the model key of the test's credential: in the tenant's
// Secret, and nowhere the agent can read it. daemonKey is the one in the
// daemon's env, which a run would forward without a credential.
const (
	credKey   = "sk-ant-credential-held-by-the-proxy"
	daemonKey = "sk-ant-realnode-not-a-key"
)

// anthropicCallScript, in the agent's pod, posts a Messages request to
// ANTHROPIC_BASE_URL with the key variable's value as the CLIs do (or
// argv[1] in its place) and prints "status CODE BODY".
const anthropicCallScript = `
const http = require('http');
const u = new URL(process.env.ANTHROPIC_BASE_URL + '/v1/messages');
const key = process.argv[1] || process.env.ANTHROPIC_API_KEY;
const req = http.request({host: u.hostname, port: u.port, path: u.pathname, method: 'POST',
  headers: {'x-api-key': key, 'content-type': 'application/json', 'anthropic-version': '2023-06-01'}}, res => {
  let d = ''; res.on('data', c => d += c); res.on('end', () => console.log('status ' + res.statusCode + ' ' + d));
});
req.on('error', e => console.log('error ' + e.message));
req.end(JSON.stringify({model: 'm', max_tokens: 1, messages: [{role: 'user', content: 'hi'}]}));
`

// environScanScript prints how many of the pod's processes hold a value
// whose SHA-256 is one of argv's in their environment (hashes: the keys
// themselves never go into an exec's command line).
const environScanScript = `
const fs = require('fs'), crypto = require('crypto');
const want = new Set(process.argv.slice(1));
let procs = 0, hits = 0;
for (const p of fs.readdirSync('/proc')) {
  if (!/^\d+$/.test(p)) continue;
  let env; try { env = fs.readFileSync('/proc/' + p + '/environ', 'utf8'); } catch (e) { continue; }
  procs++;
  for (const kv of env.split('\0')) {
    const v = kv.slice(kv.indexOf('=') + 1);
    if (want.has(crypto.createHash('sha256').update(v).digest('hex'))) hits++;
  }
}
console.log('procs ' + procs + ' hits ' + hits);
`

func sha(s string) string { h := sha256.Sum256([]byte(s)); return hex.EncodeToString(h[:]) }

// TestCredentialsStayInTheProxy: on the real node with the enforcer, a
// company declares an anthropic credential (its Secret in the tenant). Its
// run's pod gets a token and the proxy's credential route; a Messages
// request from the pod reaches the stand-in Anthropic API (TLS, in the
// test's network namespace, api.anthropic.com through the proxy pod's
// hostAliases) with the real key in x-api-key and no token; a forged
// token is refused with 403 and the provider sees nothing; neither the
// credential's key nor the daemon's reaches any process of the pod, its
// spec, the per-run Secret or the proxy's log.
func TestCredentialsStayInTheProxy(t *testing.T) {
	c := testcluster.Get(t)
	node := c.RealNode()
	if !node.NetworkPolicy() {
		t.Fatal("the real node does not enforce NetworkPolicies: TestMain sets RealNodeOptions.NetworkPolicy")
	}
	p := pushImages(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	cs := c.Client()
	ns := c.Namespace(t, "cred", nil)
	i := strings.LastIndexByte(ns, '-')
	slug := ns[i+1:]

	var mu sync.Mutex
	var seen []http.Header
	tn := newTestNet(ctx, t)
	ln, err := tn.Listen("tcp4", testnet.PublicAddress+":443")
	if err != nil {
		t.Fatal(err)
	}
	srv, caPEM, err := testnet.ServeHTTPSPEM(ln, []string{"api.anthropic.com"}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Clone())
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"type":"message","usage":{"input_tokens":7,"output_tokens":1}}`)
	}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	for _, obj := range []any{
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "model-keys"}, StringData: map[string]string{"anthropic": credKey}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "test-ca"}, Data: map[string]string{"ca.pem": string(caPEM)}},
	} {
		var err error
		switch o := obj.(type) {
		case *corev1.Secret:
			_, err = cs.CoreV1().Secrets(ns).Create(ctx, o, metav1.CreateOptions{})
		case *corev1.ConfigMap:
			_, err = cs.CoreV1().ConfigMaps(ns).Create(ctx, o, metav1.CreateOptions{})
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	m := writeCredentialConfig(t, t.TempDir(), ns[:i+1], slug, p, node)
	applyTenant(ctx, t, c, m)
	proxyPod := waitRunning(ctx, t, c, ns, agentpod.LabelRole+"="+agentpod.RoleEgressProxy)
	if err := tn.Forward(node.PodBridge()); err != nil {
		t.Fatal(err)
	}
	if err := tn.CheckRoute(ctx, testnet.PublicAddress); err != nil {
		t.Fatalf("send nothing: %v", err)
	}
	addrs := agentenv.NewAddresses(cs)
	if err := addrs.Start(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := tokensync.New(cs, tokensync.Options{}).Run(ctx); err != nil {
		t.Fatal(err)
	}
	startProxyRun(t, c, m, addrs, slug, t.TempDir())
	jobPod := waitRunning(ctx, t, c, ns, agentpod.LabelRunID)
	for _, pod := range []*corev1.Pod{proxyPod, jobPod} {
		if err := node.WaitFirewalled(ctx, ns, pod.Name); err != nil {
			t.Fatal(err)
		}
		if err := tn.CheckRouteFrom(ctx, testnet.PublicAddress, pod.Status.PodIP, node.PodBridge()); err != nil {
			t.Fatalf("send nothing: %v", err)
		}
	}
	exec := func(args ...string) string {
		t.Helper()
		out, err := podExec(ctx, c, ns, jobPod.Name, jobPod.Spec.Containers[0].Name, append([]string{"node", "-e"}, args...))
		if err != nil {
			t.Fatalf("exec in %s: %v\n%s", jobPod.Name, err, out)
		}
		return strings.TrimSpace(out)
	}
	// The proxy's Service is programmed, and the token reaches the proxy's
	// annotations file, a moment after the pod runs.
	var out string
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(time.Second) {
		if out = exec(anthropicCallScript); strings.HasPrefix(out, "status 200") || time.Now().After(deadline) {
			break
		}
	}
	if !strings.HasPrefix(out, "status 200") || !strings.Contains(out, `"input_tokens":7`) {
		t.Fatalf("the run's request through the credential route: %s", out)
	}
	mu.Lock()
	got := seen[len(seen)-1]
	n := len(seen)
	mu.Unlock()
	if got.Get("x-api-key") != credKey {
		t.Errorf("the provider got x-api-key %q, want the credential's key", got.Get("x-api-key"))
	}
	if out := exec(anthropicCallScript, "pcsync-run-forged"); !strings.HasPrefix(out, "status 403") {
		t.Errorf("a forged token: %s, want 403", out)
	}
	mu.Lock()
	if len(seen) != n {
		t.Errorf("the forged token's request reached the provider")
	}
	mu.Unlock()
	assertKeysNowhere(ctx, t, c, ns, jobPod, proxyPod, exec)
	checkLeaseCredential(ctx, t, c, m, addrs, ns, slug, func() int { mu.Lock(); defer mu.Unlock(); return len(seen) },
		func() string { mu.Lock(); defer mu.Unlock(); return seen[len(seen)-1].Get("x-api-key") })
}

// paperclipKey is the key Paperclip's execute env carries for a stock
// claude_local run: the daemon must replace it.
const paperclipKey = "sk-ant-paperclip-adapter-env-key"

// checkLeaseCredential: a lease of the company (the sandbox Manager, as
// the daemon runs it) gets an execute whose env carries Paperclip's key
// and the provider's own base URL, as a stock adapter's does: the command
// sees the lease's token and the proxy's route instead, and its request
// reaches the stand-in with the credential's key.
func checkLeaseCredential(ctx context.Context, t *testing.T, c *testcluster.Cluster, model *config.Model,
	addrs *agentenv.Addresses, ns, slug string, requests func() int, lastKey func() string) {
	t.Helper()
	m, info := firewalledLease(ctx, t, c, model, addrs, ns, slug, "cred-lease")
	env := map[string]string{"ANTHROPIC_API_KEY": paperclipKey, "ANTHROPIC_BASE_URL": "https://api.anthropic.com"}
	run := func(args ...string) string {
		t.Helper()
		r, err := m.Execute(ctx, sandbox.ExecParams{LeaseID: info.ID, Command: "node", Args: args, Env: env, Timeout: time.Minute}, nil)
		if err != nil {
			t.Fatalf("execute in lease %s: %v", info.ID, err)
		}
		return strings.TrimSpace(r.Stdout)
	}
	if got := run("-e", "const k = process.env.ANTHROPIC_API_KEY; console.log(k.startsWith('pcsync-run-'), k.includes('paperclip'))"); got != "true false" {
		t.Errorf("the lease command's ANTHROPIC_API_KEY: token %s; want the lease's token, not Paperclip's key", got)
	}
	before := requests()
	var out string
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(time.Second) {
		if out = run("-e", anthropicCallScript); strings.HasPrefix(out, "status 200") || time.Now().After(deadline) {
			break
		}
	}
	if !strings.HasPrefix(out, "status 200") || requests() == before || lastKey() != credKey {
		t.Errorf("the lease's request through the credential route: %s; the provider got the credential's key: %v", out, lastKey() == credKey)
	}
}

// assertKeysNowhere checks that neither key is in the pod's processes'
// environments, its spec, the run's Secret or the proxy's log.
func assertKeysNowhere(ctx context.Context, t *testing.T, c *testcluster.Cluster, ns string, jobPod, proxyPod *corev1.Pod, exec func(...string) string) {
	t.Helper()
	if out := exec(environScanScript, sha(credKey), sha(daemonKey)); !strings.HasSuffix(out, " hits 0") || strings.HasPrefix(out, "procs 0") {
		t.Errorf("the keys in the pod's processes' environments: %s", out)
	}
	cs := c.Client()
	pod, err := cs.CoreV1().Pods(ns).Get(ctx, jobPod.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sec, err := cs.CoreV1().Secrets(ns).Get(ctx, jobPod.Labels["batch.kubernetes.io/job-name"], metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	logs, err := cs.CoreV1().Pods(ns).GetLogs(proxyPod.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The control: the run's token, which the pod must hold, is found by
	// the same scan.
	token := ""
	for _, v := range sec.Data {
		if strings.HasPrefix(string(v), "pcsync-run-") {
			token = string(v)
		}
	}
	if out := exec(environScanScript, sha(token)); token == "" || strings.HasSuffix(out, " hits 0") {
		t.Errorf("the control: the run's token (found in its Secret: %v) in the pod's environments: %s; want it found", token != "", out)
	}
	specJSON, _ := json.Marshal(pod)
	secJSON, _ := json.Marshal(sec)
	for what, text := range map[string]string{"the pod": string(specJSON), "the run's Secret": string(secJSON), "the proxy's log": string(logs)} {
		for _, key := range []string{credKey, daemonKey} {
			if strings.Contains(text, key) {
				t.Errorf("%s holds the key %q", what, key[:10]+"…")
			}
		}
	}
}

// writeCredentialConfig writes and loads the config: one company in egress
// mode proxy with an anthropic credential; its agent and its proxy on the
// real node, the proxy resolving api.anthropic.com to the stand-in and
// trusting the stand-in's certificate (SSL_CERT_FILE, from a ConfigMap).
func writeCredentialConfig(t testing.TB, dir, prefix, slug string, p pushed, node *testcluster.RealNode) *config.Model {
	t.Helper()
	pl := placementOf(node)
	settings := testSettings(prefix, p.Registry, node, "{cpu: 200m, memory: 128Mi}")
	company := fmt.Sprintf(`apiVersion: pcsync.io/v1alpha1
kind: Company
metadata: {name: %q}
spec:
  id: company-%s
  credentials:
    - {name: claude, provider: anthropic, secretRef: {name: model-keys, key: anthropic}}
  agents:
%s  patches:
%s`, slug, slug, pl.Agent("name: pinned, adapter: claude_local"), proxyPatch(pl, []string{"api.anthropic.com"}, true, ""))
	for name, text := range map[string]string{"settings.yaml": settings, "company.yaml": company} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	m, err := loadConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	return m
}
