//go:build integration

package realnode

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// headerCallScript, in an agent's pod, calls the header credential's API
// as a tool does, from the variables pcsync gives it: GET
// $REGISTRY_URL/images/list with the run's token in the credential's
// header ($1, when set, replaces the token: a forged one), and prints the
// status code and the body.
const headerCallScript = `
const u = new URL(process.env.REGISTRY_URL + '/images/list');
const token = process.argv[1] || process.env.REGISTRY_TOKEN;
require('http').get({host: u.hostname, port: u.port, path: u.pathname, headers: {'x-registry-token': 'Token ' + token}},
  res => { let b = ''; res.on('data', d => b += d); res.on('end', () => console.log(res.statusCode + ' ' + b.trim())); })
  .on('error', e => console.log('error ' + e.message));
`

// TestHeaderCredentialStaysInTheProxy: on the real node with the
// enforcer, a company declares a header credential (an API's key in the
// tenant's Secret, sent in X-Registry-Token after the scheme Token, to
// https://registry.example.com/v2, the test's stand-in with TLS of its
// CA). A run's pod calls the route from the variables it is given
// (REGISTRY_URL, REGISTRY_TOKEN) with the run's token in that header: the
// stand-in receives the real key in it, on the path under the base URL.
// A forged token reaches nothing. The pod holds only the run's token: the
// key is in no process's environment, no file of its writable mounts,
// the proxy's log or the audit log, each search beside its control.
func TestHeaderCredentialStaysInTheProxy(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	e := newGitCredEnv(ctx, t, map[string]string{"README.md": "acme's repository\n"}, nil)
	pod := e.startRun(ctx, t, "header-1")
	node := func(script string, args ...string) string {
		out, err := podExec(ctx, e.c, e.ns, pod.Name, pod.Spec.Containers[0].Name, append([]string{"node", "-e", script}, args...))
		if err != nil {
			t.Fatalf("exec in %s: %v\n%s", pod.Name, err, out)
		}
		return strings.TrimSpace(out)
	}
	var out string
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(time.Second) {
		if out = node(headerCallScript); strings.HasPrefix(out, "200 ") {
			break
		}
	}
	if out != "200 registry answered /v2/images/list" {
		t.Fatalf("the header credential's route from the run's pod: %q", out)
	}
	want := [][2]string{{"/v2/images/list", "Token " + headerKey}}
	if diff := cmp.Diff(want, e.server.headerRequests()); diff != "" {
		t.Errorf("what the API got (-want +got):\n%s", diff)
	}
	if got := node(headerCallScript, "pcsync-run-forged"); !strings.HasPrefix(got, "403 ") {
		t.Errorf("a forged token through the route: %q, want 403", got)
	}
	if n := len(e.server.headerRequests()); n != 1 {
		t.Errorf("the API got %d requests after a forged token's, want 1", n)
	}
	token := runToken(ctx, t, e, pod)
	if env := node(`console.log(require('crypto').createHash('sha256').update(process.env.REGISTRY_TOKEN || '').digest('hex'))`); env != sha(token) {
		t.Errorf("REGISTRY_TOKEN in the pod is not the run's token (SHA-256 %s)", env)
	}
	if out := node(environScanScript, sha(headerKey)); !strings.HasSuffix(out, " hits 0") || strings.HasPrefix(out, "procs 0") {
		t.Errorf("the key in the pod's processes' environments: %s", out)
	}
	if out := node(environScanScript, sha(token)); strings.HasSuffix(out, " hits 0") {
		t.Errorf("the control: the run's token in the pod's environments: %s; want it found", out)
	}
	marker := "header-marker-" + randomHex(8)
	if _, err := e.sh(ctx, pod, `echo "$1" > "$HOME/marker"`, marker); err != nil {
		t.Fatal(err)
	}
	files := node(fileScanScript, "key", headerKey[:4], strconv.Itoa(len(headerKey)), sha(headerKey),
		"marker", marker[:14], strconv.Itoa(len(marker)), sha(marker))
	if f := strings.Fields(files); len(f) != 8 || f[5] != "0" || f[7] == "0" || f[3] == "0" {
		t.Errorf("the pod's writable files: %s; want the key in none, the marker (the control) found", files)
	}
	logs := e.proxyLog(ctx, t)
	if !strings.Contains(logs, "reason=bad_token") {
		t.Errorf("the control: the proxy's log does not say why the forged token was refused")
	}
	audit, err := os.ReadFile(e.c.AuditLogPath())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(audit), "/namespaces/"+e.ns+"/pods/"+pod.Name+"/exec") {
		t.Errorf("the control: the audit log has no exec in %s", pod.Name)
	}
	for what, text := range map[string]string{"the proxy's log": logs, "the audit log": string(audit)} {
		if strings.Contains(text, headerKey) {
			t.Errorf("%s holds the key", what)
		}
	}
}
