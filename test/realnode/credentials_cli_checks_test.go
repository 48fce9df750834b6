//go:build integration

package realnode

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pcsync/pcsync/internal/lib/agentpod"
	"github.com/pcsync/pcsync/internal/testing/testnet"
	"github.com/pcsync/pcsync/pkg/egressproxy/allow"
	"github.com/pcsync/pcsync/pkg/result"
	"github.com/pcsync/pcsync/pkg/sandbox"
)

// cliKeys are every key of TestRealCLIsThroughTheProxy that no pod may
// hold: the credentials', the gateway's, Paperclip's and the daemon's.
var cliKeys = []string{cliAnthropicKey, cliOpenAIKey, gatewayKey, gatewayUpstreamKey, refusedKey, paperclipKey, paperclipOpenAIKey, daemonKey}

// checkProvidersGotKeys wants every model call to have reached its
// stand-in with the right key (a Job's and a lease's at least), and
// none with a token or Paperclip's key.
func (e *cliEnv) checkProvidersGotKeys(t *testing.T) {
	t.Helper()
	want := map[string][]string{
		"api.anthropic.com": {cliAnthropicKey, refusedKey},
		"api.openai.com":    {cliOpenAIKey, gatewayUpstreamKey},
		gatewayHost:         {gatewayKey},
	}
	for host, keys := range want {
		got := e.api.keys(host)
		for _, k := range keys {
			if n := count(got, k); n < 2 && k != refusedKey || n < 1 {
				t.Errorf("%s got %d model calls with the key %s…, want a Job's and a lease's", host, n, k[:12])
			}
		}
		for _, k := range got {
			if !slices.Contains(keys, k) {
				t.Errorf("%s got a model call with the key %.12q…, not the credential's", host, k)
			}
		}
	}
}

func count(ss []string, s string) int {
	n := 0
	for _, x := range ss {
		if x == s {
			n++
		}
	}
	return n
}

// routeCallScript posts, from a pod, to the credential route at argv[1]
// (http://IP:PORT/credentials/NAME/PATH) with the token read from stdin in
// header argv[2], and prints "status CODE BODY" or "error MESSAGE".
const routeCallScript = `
const http = require('http');
let token = ''; process.stdin.on('data', c => token += c); process.stdin.on('end', () => {
  const u = new URL(process.argv[1]);
  const v = process.argv[2] === 'authorization' ? 'Bearer ' + token.trim() : token.trim();
  const req = http.request({host: u.hostname, port: u.port, path: u.pathname, method: 'POST', timeout: 5000,
    headers: {[process.argv[2]]: v, 'content-type': 'application/json'}}, res => {
    let d = ''; res.on('data', c => d += c); res.on('end', () => console.log('status ' + res.statusCode + ' ' + d.trim()));
  });
  req.on('timeout', () => { console.log('error timeout'); req.destroy(); });
  req.on('error', e => console.log('error ' + e.message));
  req.end('{}');
});
`

// directConnectScript opens a TCP connection to argv[1]:443 and prints
// "connected" or "error MESSAGE".
const directConnectScript = `
const s = require('net').connect({host: process.argv[1], port: 443, timeout: 5000}, () => { console.log('connected'); s.destroy(); });
s.on('timeout', () => { console.log('error timeout'); s.destroy(); });
s.on('error', e => console.log('error ' + e.message));
`

// checkTokensRefused: tenant a's token is refused by tenant b's proxy
// (403), and b's pod cannot reach a's proxy at all (the control: it
// reaches its own); a token whose lease ended is refused as ended.
func (e *cliEnv) checkTokensRefused(ctx context.Context, t *testing.T, claudeA, codexA, codexB sandbox.LeaseInfo) {
	t.Helper()
	printKey := []string{"-e", "console.log(process.env.CODEX_API_KEY || process.env.ANTHROPIC_API_KEY)"}
	tokenA := strings.TrimSpace(e.execute(ctx, t, codexA, "node", printKey, nil, paperclipOpenAIEnv))
	tokenClaude := strings.TrimSpace(e.execute(ctx, t, claudeA, "node", printKey, nil, map[string]string{"ANTHROPIC_API_KEY": paperclipKey}))
	if !strings.HasPrefix(tokenA, "pcsync-run-") || !strings.HasPrefix(tokenClaude, "pcsync-run-") {
		t.Fatalf("the leases' key variables hold %.12q… and %.12q…, want their tokens", tokenA, tokenClaude)
	}
	ipA, ipB := e.proxyIP(ctx, t, e.nsA), e.proxyIP(ctx, t, e.nsB)
	call := func(l sandbox.LeaseInfo, ip, route, header, token string) string {
		url := fmt.Sprintf("http://%s:%d/credentials/%s", ip, allow.ProxyPort, route)
		return strings.TrimSpace(e.execute(ctx, t, l, "node", []string{"-e", routeCallScript, url, header}, &token, nil))
	}
	out := call(codexB, ipB, "codex/v1/responses", "authorization", tokenA)
	t.Logf("tenant a's token at tenant b's proxy: %s", out)
	if !strings.HasPrefix(out, "status 403") || !strings.Contains(out, "bad_token") {
		t.Errorf("tenant a's token at tenant b's proxy: %s; want 403 bad_token", out)
	}
	out = call(codexB, ipA, "codex/v1/responses", "authorization", tokenA)
	t.Logf("tenant b's pod at tenant a's proxy: %s", out)
	if !strings.HasPrefix(out, "error") {
		t.Errorf("tenant b's pod at tenant a's proxy: %s; want no connection (the NetworkPolicy)", out)
	}
	out = strings.TrimSpace(e.execute(ctx, t, codexA, "node", []string{"-e", directConnectScript, testnet.PublicAddress}, nil, nil))
	t.Logf("the provider's address without the proxy: %s", out)
	if !strings.HasPrefix(out, "error") {
		t.Errorf("tenant a's pod straight to the provider's address: %s; want no connection (the NetworkPolicy)", out)
	}
	if _, err := e.m.Release(ctx, sandbox.ReleaseParams{ID: claudeA.ID}); err != nil {
		t.Fatal(err)
	}
	// The lease's pod goes, tokensync drops its hash from the proxy's
	// annotations, and the kubelet rewrites the proxy's file: then the
	// token is an ended run's.
	for deadline := time.Now().Add(90 * time.Second); time.Now().Before(deadline); time.Sleep(time.Second) {
		if out = call(codexA, ipA, "claude/v1/messages", "x-api-key", tokenClaude); strings.Contains(out, "run_ended") {
			break
		}
	}
	t.Logf("the ended lease's token: %s", out)
	if !strings.HasPrefix(out, "status 403") || !strings.Contains(out, "run_ended") {
		t.Errorf("the ended lease's token: %s; want 403 run_ended", out)
	}
	e.tokens = []string{tokenA, tokenClaude}
}

// proxyIP is the ClusterIP of the tenant's egress proxy Service.
func (e *cliEnv) proxyIP(ctx context.Context, t *testing.T, ns string) string {
	t.Helper()
	l, err := e.c.Client().CoreV1().Services(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range l.Items {
		if s.Spec.Selector[agentpod.LabelRole] == agentpod.RoleEgressProxy {
			return s.Spec.ClusterIP
		}
	}
	t.Fatalf("no egress proxy Service in %s", ns)
	return ""
}

// fsScanScript walks the pod's filesystem (but /proc, /sys and /dev) for
// the needles read from stdin (a JSON list, the last a marker it first
// writes to a file of its own: the control) and prints, per needle, how
// many files hold it.
const fsScanScript = `
const fs = require('fs'), path = require('path');
let raw = ''; process.stdin.on('data', c => raw += c); process.stdin.on('end', () => {
  const needles = JSON.parse(raw), marker = needles[needles.length - 1];
  fs.writeFileSync('/tmp/pcsync-scan-control', 'x' + marker + 'x');
  const hits = needles.map(() => 0); let files = 0;
  const walk = d => { let ents; try { ents = fs.readdirSync(d, {withFileTypes: true}); } catch (e) { return; }
    for (const e of ents) { const p = path.join(d, e.name);
      if (['/proc', '/sys', '/dev'].includes(p)) continue;
      if (e.isDirectory()) { walk(p); continue; }
      if (!e.isFile()) continue;
      let st; try { st = fs.statSync(p); } catch (e) { continue; } if (st.size > 8 << 20) continue;
      let b; try { b = fs.readFileSync(p); } catch (e) { continue; } files++;
      needles.forEach((n, i) => { if (b.includes(n)) hits[i]++; }); } };
  walk('/'); console.log(JSON.stringify({files, hits}));
});
`

// checkKeysNowhere looks for every key in a live lease pod's processes'
// environments and files, in every pod's spec and every Secret but the
// tenants' own key Secrets, in the results and run logs, in the proxies'
// and the daemon's logs and in the API server's audit log; each search
// beside a control that finds what it must.
func (e *cliEnv) checkKeysNowhere(ctx context.Context, t *testing.T, l sandbox.LeaseInfo) {
	t.Helper()
	hashes := []string{"-e", environScanScript}
	for _, k := range cliKeys {
		hashes = append(hashes, sha(k))
	}
	if out := e.execute(ctx, t, l, "node", hashes, nil, paperclipOpenAIEnv); !strings.Contains(out, " hits 0") || strings.Contains(out, "procs 0") {
		t.Errorf("the keys in the lease pod's processes' environments: %s", out)
	}
	if out := e.execute(ctx, t, l, "node", []string{"-e", environScanScript, sha(e.tokens[0])}, nil, paperclipOpenAIEnv); strings.Contains(out, " hits 0") {
		t.Errorf("the control: the lease's token in its processes' environments: %s; want it found", out)
	}
	needles, _ := json.Marshal(append(slices.Clone(cliKeys), "pcsync-scan-control-marker"))
	var got struct {
		Files int   `json:"files"`
		Hits  []int `json:"hits"`
	}
	out := e.execute(ctx, t, l, "node", []string{"-e", fsScanScript}, strp(string(needles)), nil)
	if err := json.Unmarshal([]byte(strings.TrimSpace(out)), &got); err != nil || len(got.Hits) != len(cliKeys)+1 {
		t.Fatalf("the filesystem scan: %q: %v", out, err)
	}
	t.Logf("the lease pod's files: %d read, hits per key %v, the control %d", got.Files, got.Hits[:len(cliKeys)], got.Hits[len(cliKeys)])
	if got.Hits[len(cliKeys)] == 0 || got.Files < 100 || slices.Max(got.Hits[:len(cliKeys)]) != 0 {
		t.Errorf("the lease pod's files (%d read): hits per key %v, the control %d; want no key and the control found", got.Files, got.Hits[:len(cliKeys)], got.Hits[len(cliKeys)])
	}
	e.checkKeysNotInObjects(ctx, t)
	e.checkKeysNotInLogs(ctx, t)
}

// checkKeysNotInObjects: no pod's spec and no Secret but the tenants' own
// key Secrets holds a key; the per-run Secrets (the control) hold tokens.
func (e *cliEnv) checkKeysNotInObjects(ctx context.Context, t *testing.T) {
	t.Helper()
	cs := e.c.Client()
	for _, ns := range []string{e.nsA, e.nsB} {
		pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		secrets, err := cs.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		secrets.Items = slices.DeleteFunc(secrets.Items, func(s corev1.Secret) bool { return s.Name == "model-keys" || s.Name == "gateway-keys" })
		podsJSON, _ := json.Marshal(pods)
		secretsJSON, _ := json.Marshal(secrets)
		if len(pods.Items) < 2 {
			t.Errorf("%s has %d pods; want the proxy's and the leases' at least", ns, len(pods.Items))
		}
		assertNoKey(t, "the pods of "+ns, string(podsJSON))
		assertNoKey(t, "the Secrets of "+ns, string(secretsJSON))
	}
	for _, name := range []string{"claude-job", "codex-job", "gateway-job", "refused-job"} {
		for _, suffix := range []string{".log", result.Suffix} {
			b, err := os.ReadFile(filepath.Join(e.spool, name+suffix))
			if err != nil {
				t.Errorf("%s%s: %v", name, suffix, err)
			}
			assertNoKey(t, name+suffix, string(b))
		}
	}
}

// checkKeysNotInLogs: neither a key nor a token is in the proxies' logs,
// the daemon's or the audit log (whose control is the leases' exec).
func (e *cliEnv) checkKeysNotInLogs(ctx context.Context, t *testing.T) {
	t.Helper()
	for _, ns := range []string{e.nsA, e.nsB} {
		proxy := waitRunning(ctx, t, e.c, ns, agentpod.LabelRole+"="+agentpod.RoleEgressProxy)
		logs, err := e.c.Client().CoreV1().Pods(ns).GetLogs(proxy.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(logs), "credential token refused") && ns == e.nsB {
			t.Errorf("the control: tenant b's proxy log does not say it refused a token:\n%s", logs)
		}
		assertNoKey(t, "the proxy's log in "+ns, string(logs), e.tokens...)
	}
	assertNoKey(t, "the daemon's log", e.log.String(), e.tokens...)
	audit, err := os.ReadFile(e.c.AuditLogPath())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(audit), "/namespaces/"+e.nsA+"/pods/") {
		t.Errorf("the control: the audit log %s has no request of %s", e.c.AuditLogPath(), e.nsA)
	}
	assertNoKey(t, "the audit log", string(audit), e.tokens...)
}

// assertNoKey fails the test when text holds a key, or one of also.
func assertNoKey(t *testing.T, what, text string, also ...string) {
	t.Helper()
	for _, k := range append(slices.Clone(cliKeys), also...) {
		if k != "" && strings.Contains(text, k) {
			t.Errorf("%s holds %.14q…", what, k)
		}
	}
}
