//go:build integration

package realnode

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pcsync/pcsync/internal/testing/testnet"
	"github.com/pcsync/pcsync/pkg/sandbox"
)

// gitPushScript, in an agent's pod, clones https://github.com/acme/repo.git
// into HOME, commits marker.txt holding $1 and pushes it, as an agent
// does: plain git, no credential on its command line.
const gitPushScript = `set -e
cd "${HOME:-/workspace}"; rm -rf work
git clone -q https://github.com/acme/repo.git work
cd work
echo "$1" > marker.txt
git add marker.txt
git -c user.name=agent -c user.email=agent@pcsync.invalid commit -qm "$1"
git push -q origin HEAD:main
echo pushed`

// routeStatusScript, in an agent's pod, asks the credential route's git
// side for acme/repo's refs with the token $1 (the pod's own when empty)
// and prints the status code.
const routeStatusScript = `
const http = require('http');
const u = new URL(process.env.GITHUB_API_URL.replace(/api$/, 'git/acme/repo.git/info/refs?service=git-upload-pack'));
const token = process.argv[1] || process.env.GITHUB_TOKEN;
http.get({host: u.hostname, port: u.port, path: u.pathname + u.search, headers: {authorization: 'Bearer ' + token}},
  res => { res.resume(); console.log(res.statusCode); }).on('error', e => console.log('error ' + e.message));
`

// fileScanScript prints how many files of the pod's writable mounts hold
// each target: argv holds name, prefix, length, SHA-256 of the whole, per
// target (so that no secret goes on a command line); a file holds it
// where the prefix starts a string of that length with that hash.
const fileScanScript = `
const fs = require('fs'), path = require('path'), crypto = require('crypto');
const args = process.argv.slice(1), targets = [];
for (let i = 0; i < args.length; i += 4) targets.push({name: args[i], prefix: args[i+1], len: +args[i+2], sha: args[i+3], hits: 0});
const mounts = fs.readFileSync('/proc/mounts', 'utf8').split('\n').map(l => l.split(' '))
  .filter(m => m.length > 3 && m[3].split(',').includes('rw') && !/^\/(proc|sys|dev)(\/|$)/.test(m[1])).map(m => m[1]);
let files = 0;
const seen = new Set();
function scan(p) {
  let st; try { st = fs.lstatSync(p); } catch (e) { return; }
  if (st.isDirectory()) { for (const n of fs.readdirSync(p)) scan(path.join(p, n)); return; }
  if (!st.isFile() || seen.has(st.ino + ':' + st.dev)) return;
  seen.add(st.ino + ':' + st.dev);
  let b; try { b = fs.readFileSync(p); } catch (e) { return; }
  files++;
  for (const t of targets) {
    for (let i = b.indexOf(t.prefix); i >= 0; i = b.indexOf(t.prefix, i + 1)) {
      if (crypto.createHash('sha256').update(b.subarray(i, i + t.len)).digest('hex') === t.sha) { t.hits++; break; }
    }
  }
}
for (const m of mounts) scan(m);
console.log('mounts ' + mounts.length + ' files ' + files + ' ' + targets.map(t => t.name + ' ' + t.hits).join(' '));
`

// TestGitCredentialStaysInTheProxy: on the real node with the enforcer, a
// company declares a github credential (its token in the tenant's
// Secret). A run's pod clones and pushes https://github.com/acme/repo.git
// with plain git: its git config sends them through the proxy's
// credential route, and the GitHub stand-in (TLS of the test's CA, in the
// test's network namespace) receives the real token in Basic on every
// request and the pushed commit. The pod holds only the run's token: the
// real one is in no process's environment, no file of its writable
// mounts, its spec, its Secret, the proxy's log or the API server's audit
// log, each search beside a control that finds what is there. The run's
// token is refused from another run's pod, and after its run ended.
func TestGitCredentialStaysInTheProxy(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	e := newGitCredEnv(ctx, t, map[string]string{"README.md": "acme's repository\n"}, nil)
	pod := e.startRun(ctx, t, "git-1")
	marker := "agent-commit-" + randomHex(8)
	if out := e.untilOK(ctx, t, pod, gitPushScript, marker); !strings.Contains(out, "pushed") {
		t.Fatalf("git clone and push in the run's pod: %s", out)
	}
	if got := e.server.g.git(e.server.g.bare, "log", "-1", "--format=%s", "main"); strings.TrimSpace(got) != marker {
		t.Errorf("the server's main is at %q, want the pushed commit %q", got, marker)
	}
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte("x-access-token:"+gitToken))
	reqs := e.server.requests()
	ok := 0
	for _, a := range reqs {
		if a == basic {
			ok++
		}
	}
	// A clone's two requests and a push's two; earlier tries refused by
	// the proxy reach nothing.
	if ok < 4 || ok != len(reqs) {
		t.Errorf("the server got %d requests, %d with the real token in Basic; want every one, at least 4", len(reqs), ok)
	}
	token := runToken(ctx, t, e, pod)
	for _, a := range reqs {
		if strings.Contains(a, token) {
			t.Errorf("the server got the run's token")
		}
	}
	checkGitTokenNowhere(ctx, t, e, pod, token, marker)
	checkRunTokenRefused(ctx, t, e, token)
	checkLeaseGit(ctx, t, e)
}

// checkLeaseGit: a lease of the company (pcsync's sandbox Manager, as the
// daemon runs it), whose execute's env carries no key, clones and pushes
// the same way: the execute gets the lease's token and git's config, the
// server the real token, and the execute's env no real token.
func checkLeaseGit(ctx context.Context, t *testing.T, e *gitCredEnv) {
	t.Helper()
	m, info := firewalledLease(ctx, t, e.c, e.model, e.addrs, e.ns, e.slug, "git-lease")
	marker := "lease-commit-" + randomHex(8)
	n := len(e.server.requests())
	var out string
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(time.Second) {
		r, err := m.Execute(ctx, sandbox.ExecParams{LeaseID: info.ID, Command: "sh", Args: []string{"-c", gitPushScript + `
env | grep -c '^GITHUB_TOKEN=pcsync-run-'`, "sh", marker}, Timeout: time.Minute}, nil)
		if err != nil {
			t.Fatalf("execute in lease %s: %v", info.ID, err)
		}
		if out = r.Stdout + r.Stderr; r.ExitCode != nil && *r.ExitCode == 0 {
			break
		}
	}
	if !strings.Contains(out, "pushed\n1") {
		t.Fatalf("git clone and push in the lease, its GITHUB_TOKEN the lease's token: %s", out)
	}
	if got := e.server.g.git(e.server.g.bare, "log", "-1", "--format=%s", "main"); strings.TrimSpace(got) != marker {
		t.Errorf("the server's main is at %q, want the lease's commit %q", got, marker)
	}
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte("x-access-token:"+gitToken))
	for _, a := range e.server.requests()[n:] {
		if a != basic {
			t.Errorf("the server got a request of the lease without the real token in Basic")
		}
	}
}

// runToken is the run's token, from its Secret.
func runToken(ctx context.Context, t *testing.T, e *gitCredEnv, pod *corev1.Pod) string {
	t.Helper()
	sec, err := e.c.Client().CoreV1().Secrets(e.ns).Get(ctx, pod.Labels["batch.kubernetes.io/job-name"], metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range sec.Data {
		if strings.HasPrefix(string(v), "pcsync-run-") {
			return string(v)
		}
	}
	t.Fatalf("Secret/%s/%s holds no run token", e.ns, sec.Name)
	return ""
}

// checkGitTokenNowhere: the real token is in none of the pod's
// environments and files, its spec, its Secret, the proxy's log or the
// audit log; the run's token and the pushed marker are found by the same
// searches (the controls).
func checkGitTokenNowhere(ctx context.Context, t *testing.T, e *gitCredEnv, pod *corev1.Pod, token, marker string) {
	t.Helper()
	node := func(script string, args ...string) string {
		out, err := podExec(ctx, e.c, e.ns, pod.Name, pod.Spec.Containers[0].Name, append([]string{"node", "-e", script}, args...))
		if err != nil {
			t.Fatalf("exec in %s: %v\n%s", pod.Name, err, out)
		}
		return strings.TrimSpace(out)
	}
	if out := node(environScanScript, sha(gitToken)); !strings.HasSuffix(out, " hits 0") || strings.HasPrefix(out, "procs 0") {
		t.Errorf("the real token in the pod's processes' environments: %s", out)
	}
	if out := node(environScanScript, sha(token)); strings.HasSuffix(out, " hits 0") {
		t.Errorf("the control: the run's token in the pod's environments: %s; want it found", out)
	}
	out := node(fileScanScript, "token", gitToken[:4], strconv.Itoa(len(gitToken)), sha(gitToken),
		"marker", marker[:13], strconv.Itoa(len(marker)), sha(marker))
	if f := strings.Fields(out); len(f) != 8 || f[5] != "0" || f[7] == "0" || f[3] == "0" {
		t.Errorf("the pod's writable files: %s; want the real token in none, the pushed marker (the control) found", out)
	}
	t.Logf("the pod's writable files: %s", out)
	cs := e.c.Client()
	live, err := cs.CoreV1().Pods(e.ns).Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sec, err := cs.CoreV1().Secrets(e.ns).Get(ctx, pod.Labels["batch.kubernetes.io/job-name"], metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var secret strings.Builder
	for _, v := range sec.Data {
		secret.Write(v)
		secret.WriteByte('\n')
	}
	if !strings.Contains(secret.String(), token) {
		t.Errorf("the control: the run's Secret does not hold the run's token")
	}
	var spec strings.Builder
	for _, c := range live.Spec.Containers {
		for _, v := range c.Env {
			fmt.Fprintf(&spec, "%s=%s\n", v.Name, v.Value)
		}
	}
	if !strings.Contains(spec.String(), "GIT_CONFIG_COUNT=") {
		t.Errorf("the control: the pod's spec has no git config:\n%s", spec.String())
	}
	for what, text := range map[string]string{"the pod's spec": spec.String(), "the run's Secret": secret.String()} {
		if strings.Contains(text, gitToken) {
			t.Errorf("%s holds the real token", what)
		}
	}
	if strings.Contains(spec.String(), token) {
		t.Errorf("the pod's spec holds the run's token (it belongs in the run's Secret)")
	}
}

// checkRunTokenRefused: from a second run's pod, the first run's token is
// refused while the first runs (another pod's) and once it has ended;
// the second's own token is let through (the control). The proxy's log
// says why each was refused, and holds neither token.
func checkRunTokenRefused(ctx context.Context, t *testing.T, e *gitCredEnv, token string) {
	t.Helper()
	other := e.startRun(ctx, t, "git-2")
	node := func(arg string) string {
		out, err := podExec(ctx, e.c, e.ns, other.Name, other.Spec.Containers[0].Name, []string{"node", "-e", routeStatusScript, arg})
		if err != nil {
			t.Fatalf("exec in %s: %v\n%s", other.Name, err, out)
		}
		return strings.TrimSpace(out)
	}
	var own string
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(time.Second) {
		if own = node(""); own == "200" {
			break
		}
	}
	if own != "200" {
		t.Fatalf("the control: the second run's own token through the route: %s", own)
	}
	if got := node(token); got != "403" {
		t.Errorf("the first run's token from another run's pod: %s, want 403", got)
	}
	e.runs.cancelRun(t, "git-1")
	var ended string
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		if ended = node(token); ended == "403" && strings.Contains(e.proxyLog(ctx, t), "reason=run_ended") {
			break
		}
	}
	logs := e.proxyLog(ctx, t)
	if ended != "403" || !strings.Contains(logs, "reason=bad_token") || !strings.Contains(logs, "reason=run_ended") {
		t.Errorf("the first run's token after its run ended: %s; the proxy's log names bad_token %v, run_ended %v",
			ended, strings.Contains(logs, "reason=bad_token"), strings.Contains(logs, "reason=run_ended"))
	}
	for _, s := range []string{gitToken, token} {
		if strings.Contains(logs, s) {
			t.Errorf("the proxy's log holds %.10q…", s)
		}
	}
	audit, err := os.ReadFile(e.c.AuditLogPath())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(audit), "/namespaces/"+e.ns+"/pods/"+other.Name+"/exec") {
		t.Errorf("the control: the audit log %s has no exec in %s", e.c.AuditLogPath(), other.Name)
	}
	if strings.Contains(string(audit), gitToken) {
		t.Errorf("the audit log holds the real token")
	}
}

// proxyLog is the proxy's log.
func (e *gitCredEnv) proxyLog(ctx context.Context, t testing.TB) string {
	t.Helper()
	b, err := e.c.Client().CoreV1().Pods(e.ns).GetLogs(e.proxyPod.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// gitCloneRounds are the benchmark's clones each way, alternating which
// goes first.
const gitCloneRounds = 7

// gitCloneScript, in an agent's pod, clones https://github.com/acme/repo.git
// into a fresh directory and prints the milliseconds it took; with $1
// "straight" it goes to the server itself (the proxy's variables and the
// route's git config dropped, the stand-in's address and CA given to
// git) with the token in Basic ($2), else through the route.
const gitCloneScript = `set -e
cd "$HOME"; rm -rf clone
if [ "$1" = straight ]; then
  unset GIT_CONFIG_COUNT HTTPS_PROXY https_proxy HTTP_PROXY http_proxy
  set -- -c http.sslCAInfo="$HOME/ca.pem" -c "http.curloptResolve=github.com:443:$3" -c "http.extraHeader=Authorization: Basic $2"
else
  set --
fi
s=$(date +%s%N)
git "$@" clone -q https://github.com/acme/repo.git clone
e=$(date +%s%N)
du -sk clone/.git | cut -f1
echo $(( (e - s) / 1000000 ))`

// BenchmarkGitClone: git clone of a 50 MB repository (50 files of 1 MiB of
// random bytes, one commit) from the GitHub stand-in over TLS, in a run's
// pod on the real node with the enforcer: through the credential route
// (the pod's git config; the proxy sets the token) against straight to
// the server with the token (a NetworkPolicy lets the pod reach it).
// Figures: each way's p50 over gitCloneRounds clones, and their ratio.
func BenchmarkGitClone(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	e := newGitCredEnv(ctx, b, randomFiles(50, 1<<20), func(e *gitCredEnv) { (&credBenchEnv{c: e.c, ns: e.ns}).allowStraight(ctx, b) })
	pod := e.startRun(ctx, b, "bench-git")
	if _, _, err := podExecIn(ctx, e.c, e.ns, pod.Name, pod.Spec.Containers[0].Name, strings.NewReader(e.caPEM),
		[]string{"sh", "-c", `cat > "$HOME/ca.pem"`}); err != nil {
		b.Fatal(err)
	}
	basic := base64.StdEncoding.EncodeToString([]byte("x-access-token:" + gitToken))
	clone := func(mode string) (ms float64, kb string) {
		out := e.untilOK(ctx, b, pod, gitCloneScript, mode, basic, testnet.PublicAddress)
		lines := strings.Fields(out)
		v, err := strconv.ParseFloat(lines[len(lines)-1], 64)
		if err != nil || len(lines) < 2 {
			b.Fatalf("clone %s: %q", mode, out)
		}
		return v, lines[0]
	}
	for range b.N {
		times := map[string][]float64{}
		var size string
		for r := range gitCloneRounds {
			order := []string{"route", "straight"}
			if r%2 == 1 {
				order = []string{"straight", "route"}
			}
			for _, mode := range order {
				ms, kb := clone(mode)
				times[mode], size = append(times[mode], ms), kb
			}
		}
		route, straight := median(times["route"]), median(times["straight"])
		b.ReportMetric(route, "route-p50-ms")
		b.ReportMetric(straight, "straight-p50-ms")
		b.ReportMetric(route/straight, "ratio")
		b.Logf("git clone of a %s KiB .git, %d clones each: route p50 %.0f ms %v, straight p50 %.0f ms %v, %.3f×; load %s",
			size, gitCloneRounds, route, times["route"], straight, times["straight"], route/straight, loadavg())
	}
}

func median(v []float64) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	return s[len(s)/2]
}
