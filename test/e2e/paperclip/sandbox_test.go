//go:build integration

package paperclip

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/yaml"

	"github.com/pcsync/pcsync/internal/testing/testcluster"
	"github.com/pcsync/pcsync/pkg/sandbox/leasepod"
)

// sandboxWorld is a Paperclip company whose stock adapters run through
// pcsync's sandbox provider: the plugin installed in Paperclip, an
// environment of provider "pcsync" naming the pcsync company, and `pcsync
// daemon --sandbox` making one pod per lease in the company's tenant
// namespace on the project's control plane. kwok runs each pod exec on this
// host (a ClusterExec), so the stock adapter's commands really run, each
// lease under its own directory (--sandbox-host-root), with stand-in CLIs
// first on PATH.
type sandboxWorld struct {
	*world
	c       *testcluster.Cluster
	ns      string
	setNS   string // the ApplySet parent's namespace
	hostDir string
	envID   string
	envCfg  map[string]any
	// daemonArgs are the daemon's flags (to start it again).
	daemonArgs []string

	mu      sync.Mutex
	podAt   map[string]time.Time // pod name → first seen
	podGone map[string]time.Time
	pods    map[string]*corev1.Pod // as last seen
}

// sandboxOptions shape newSandboxWorld.
type sandboxOptions struct {
	// EnvConfig is merged into the environment's config.
	EnvConfig map[string]any
	// DaemonArgs are added to the daemon's flags.
	DaemonArgs []string
	// Settings is merged into the Settings spec.
	Settings map[string]any
	// Company is merged into the Company spec (beside its quota).
	Company map[string]any
	// RealNode makes lease pods real pods of the cluster's real node, from
	// the images in its registry, instead of kwok pods whose executes run
	// on this host.
	RealNode bool
}

func newSandboxWorld(t testing.TB, srv *server, o sandboxOptions) *sandboxWorld {
	t.Helper()
	tl := getTools(t)
	srv.installPlugin(t)
	c := testcluster.Get(t)
	ns, prefix, slug, setNS := tenantNamespaces(t, c, "pcsbx")
	sw := &sandboxWorld{c: c, ns: ns, setNS: setNS, podAt: map[string]time.Time{}, podGone: map[string]time.Time{}, pods: map[string]*corev1.Pod{}}
	// Short: the command servers' socket paths live under it.
	sw.hostDir = shortDir(t, "pcsbx-")
	kubeconfig := c.KubeconfigPath()
	big := map[string]any{"pods": 50, "requestsCpu": "100", "requestsMemory": "400Gi", "limitsCpu": "100", "limitsMemory": "400Gi"}
	args := []string{"--kubeconfig", kubeconfig, "--applyset-namespace", setNS, "--sandbox"}
	if !o.RealNode {
		args = append(args, "--sandbox-host-root", sw.hostDir, "--sandbox-server-path", tl.Pcsync)
	}
	args = append(args, o.DaemonArgs...)
	sw.daemonArgs = args
	settings := map[string]any{"namespacePrefix": prefix}
	for k, v := range o.Settings {
		settings[k] = v
	}
	company := map[string]any{"quota": big}
	for k, v := range o.Company {
		company[k] = v
	}
	sw.world = newWorld(t, srv, worldOptions{
		Slug: slug, Executor: "kubernetes",
		Settings:   settings,
		Company:    company,
		DaemonArgs: args,
		Before: func(w *world) {
			out, err := runCmd(w.pc.Config, nil, tl.Pcsync, "apply", w.pc.Config,
				"--kubeconfig", kubeconfig, "--applyset-namespace", setNS, "--force-conflicts")
			if err != nil {
				t.Fatalf("pcsync apply: %v", err)
			}
			t.Logf("pcsync apply:\n%s", out)
			sw.watch(t)
			if o.RealNode {
				return
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := c.ServeExec(ctx, ns, testcluster.ExecOptions{WorkDir: sw.hostDir, Env: map[string]string{
				"PATH": tl.StandinBin + ":" + tl.NodeBin + ":/usr/local/bin:/usr/bin:/bin",
			}}); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = c.StopExec(context.Background(), ns) })
		},
	})
	sw.envCfg = map[string]any{
		"provider": "pcsync", "company": slug,
		"socketPath": filepath.Join(sw.pc.State, "sandbox.sock"),
		"envAllow":   []any{"STANDIN_*"},
		"timeoutMs":  120000,
		// Sessions resume only in the lease they were made in.
		"reuseLease": true,
	}
	for k, v := range o.EnvConfig {
		sw.envCfg[k] = v
	}
	var env struct {
		ID string `json:"id"`
	}
	srv.API.must(t, "POST", "/api/companies/"+sw.company.ID+"/environments", map[string]any{
		"name": "pcsync " + slug, "driver": "sandbox", "config": sw.envCfg,
	}, &env)
	if env.ID == "" {
		t.Fatal("POST environments returned no id")
	}
	sw.envID = env.ID
	return sw
}

// shortDir is a fresh directory with a short path, removed at the end.
func shortDir(t testing.TB, prefix string) string {
	t.Helper()
	d := testcluster.HostDir(t, prefix)
	if err := os.Chmod(d, 0o755); err != nil {
		t.Fatal(err)
	}
	return d
}

// watch records when each lease pod of the namespace appears and goes.
func (sw *sandboxWorld) watch(t testing.TB) {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	w, err := sw.c.Client().CoreV1().Pods(sw.ns).Watch(ctx, leasePodsOnly)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			now := time.Now()
			sw.mu.Lock()
			switch ev.Type {
			case watch.Added:
				sw.podAt[p.Name], sw.pods[p.Name] = now, p
			case watch.Modified:
				sw.pods[p.Name] = p
			case watch.Deleted:
				sw.podGone[p.Name] = now
			}
			sw.mu.Unlock()
		}
	}()
}

// leasePodsOnly selects a namespace's lease pods: the tenant's egress proxy
// (egress mode proxy, the default) runs there too.
var leasePodsOnly = metav1.ListOptions{LabelSelector: leasepod.LabelLease}

// leasePods returns the names of the lease pods seen, and of those gone.
func (sw *sandboxWorld) leasePods() (seen, gone []string) {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	for n := range sw.podAt {
		seen = append(seen, n)
		if _, ok := sw.podGone[n]; ok {
			gone = append(gone, n)
		}
	}
	return seen, gone
}

// waitNoPods waits until every lease pod of the namespace is gone.
func (sw *sandboxWorld) waitNoPods(t testing.TB, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		pods, err := sw.c.Client().CoreV1().Pods(sw.ns).List(context.Background(), leasePodsOnly)
		if err != nil {
			t.Fatal(err)
		}
		if len(pods.Items) == 0 {
			return
		}
		if time.Now().After(deadline) {
			var names []string
			for _, p := range pods.Items {
				names = append(names, p.Name)
			}
			t.Fatalf("lease pods still in %s after %s: %v", sw.ns, within, names)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// environment creates another environment of the world's provider and
// company, its config the world's with overrides, and returns its id.
func (sw *sandboxWorld) environment(t testing.TB, name string, overrides map[string]any) string {
	t.Helper()
	cfg := maps.Clone(sw.envCfg)
	maps.Copy(cfg, overrides)
	var env struct {
		ID string `json:"id"`
	}
	sw.srv.API.must(t, "POST", "/api/companies/"+sw.company.ID+"/environments", map[string]any{
		"name": "pcsync " + sw.pc.Slug + " " + name, "driver": "sandbox", "config": cfg,
	}, &env)
	if env.ID == "" {
		t.Fatal("POST environments returned no id")
	}
	return env.ID
}

// sandboxAgent creates a stock-adapter agent that runs in the world's
// environment (engine "cli", the stand-in CLI replaying tr).
func (sw *sandboxWorld) sandboxAgent(t testing.TB, name, adapterType string, tr transcript, extraEnv map[string]string, extra map[string]any) agent {
	t.Helper()
	return sw.sandboxAgentIn(t, sw.envID, name, adapterType, tr, extraEnv, extra)
}

// sandboxAgentIn is sandboxAgent in environment envID.
func (sw *sandboxWorld) sandboxAgentIn(t testing.TB, envID, name, adapterType string, tr transcript, extraEnv map[string]string, extra map[string]any) agent {
	t.Helper()
	env := map[string]any{"STANDIN_TRANSCRIPT": tr.Path, "STANDIN_RECORD": sw.pc.Record}
	for k, v := range extraEnv {
		env[k] = v
	}
	cfg := map[string]any{"engine": "cli", "env": env, "timeoutSec": 120}
	for k, v := range extra {
		cfg[k] = v
	}
	var ag agent
	sw.srv.API.must(t, "POST", "/api/companies/"+sw.company.ID+"/agents", map[string]any{
		"name": name, "adapterType": adapterType, "adapterConfig": cfg, "defaultEnvironmentId": envID,
	}, &ag)
	return ag
}

// installPlugin installs pcsync's sandbox plugin (make paperclip-plugin)
// once per server.
func (s *server) installPlugin(t testing.TB) {
	t.Helper()
	s.pluginOnce.Do(func() {
		var out map[string]any
		s.pluginErr = s.API.do(context.Background(), "POST", "/api/plugins/install",
			map[string]any{"packageName": s.tl.Plugin, "isLocalPath": true}, &out)
		if s.pluginErr == nil {
			if st, _ := out["status"].(string); st != "" && st != "ready" {
				s.pluginErr = fmt.Errorf("plugin installed with status %q: %v", st, out)
			}
		}
	})
	if s.pluginErr != nil {
		t.Fatalf("install the pcsync sandbox plugin: %v", s.pluginErr)
	}
}

// TestSandboxClaudeRun: a stock claude_local agent whose environment is
// pcsync's sandbox wakes, its CLI runs in a lease pod of the company's tenant
// namespace, and the run ends succeeded on Paperclip with the transcript's
// tokens, cost and session; a second wake resumes the session. The probe is
// green; every lease pod is gone after its run; no server secret reached
// the CLI, and no env value or stdin is in the API server's audit log.
func TestSandboxClaudeRun(t *testing.T) {
	srv := sharedServer(t)
	tr := readTranscript(t, "claude-obers-small-success.jsonl")
	sw := newSandboxWorld(t, srv, sandboxOptions{})

	var probe map[string]any
	srv.API.must(t, "POST", "/api/environments/"+sw.envID+"/probe?companyId="+sw.company.ID, map[string]any{}, &probe)
	if ok, _ := probe["ok"].(bool); !ok {
		t.Fatalf("probe of the pcsync environment: %v", probe)
	}

	coder := sw.sandboxAgent(t, "Coder", "claude_local", tr, nil, nil)
	run, _ := runAndCheck(t, srv, coder.ID, "e2e: sandbox", runCheck{Within: 3 * time.Minute, Figures: stockFigures(t, tr), Transcript: tr})
	args, env, prompt := sw.pc.recorded(strings.ToLower(run.ID))
	if containsArg(args, "--resume") {
		t.Errorf("first run's CLI got --resume: %q", args)
	}
	if prompt == "" {
		t.Errorf("the CLI got an empty prompt")
	}
	if env["PAPERCLIP_API_KEY"] == "" {
		t.Errorf("the CLI got no PAPERCLIP_API_KEY (the run's JWT)")
	}
	for k := range env {
		if strings.Contains(k, "JWT_SECRET") || strings.HasPrefix(k, "PAPERCLIP_SECRETS_") || k == "DATABASE_URL" {
			t.Errorf("a server secret reached the sandbox: %s", k)
		}
	}

	// The second wake is handed the session. Paperclip 2026.916.1 lets
	// the CLI resume it (--resume) only in the lease it was made in, which
	// it keeps for runs with an execution workspace (reuseLease); a plain
	// wake gets a fresh lease, and the adapter says so in the run's log.
	srv.API.waitSession(t, coder.ID, tr.SessionID, time.Minute)
	run2 := srv.API.wake(t, coder.ID, "e2e: sandbox second wake")
	got2 := srv.API.waitRun(t, run2.ID, 3*time.Minute)
	if got2.Status != "succeeded" || str(got2.SessionIDBefore) != tr.SessionID {
		t.Errorf("second run: status %s, sessionIdBefore %q, error %q; want succeeded, %q", got2.Status, str(got2.SessionIDBefore), str(got2.Error), tr.SessionID)
	}
	if stdout2, _ := srv.API.runLog(t, run2.ID); !strings.Contains(stdout2, tr.SessionID) {
		t.Errorf("the second run's log does not mention the session %s it was handed", tr.SessionID)
	}

	// The plugin forwards agent.run.started with the agent's last acquire.
	// Paperclip delivers that event and asks for the run's lease on two
	// paths, in either order: the second run's lease was begun before
	// Paperclip asked for it and its acquire took it, or the acquire came
	// first and the prestart, when it came, began nothing (either way the
	// event reached the daemon). The first run's agent had no acquire yet.
	taken := "sandbox lease prestarted for its run taken by its acquire"
	late := "sandbox lease not prestarted for its run"
	if !loggedFor(sw.daemon.out.String(), taken, run2.ID) && !loggedFor(sw.daemon.out.String(), late, run2.ID) {
		t.Errorf("the daemon's log has neither %q nor %q for the second run %s", taken, late, run2.ID)
	}
	if loggedFor(sw.daemon.out.String(), "sandbox lease prestarted for its run", run.ID) {
		t.Errorf("the first run %s was prestarted: its agent had no lease acquired before", run.ID)
	}

	sw.waitNoPods(t, time.Minute)
	seen, _ := sw.leasePods()
	if len(seen) < 2 {
		t.Errorf("lease pods seen in %s: %v, want one per run (2 or more with the probe)", sw.ns, seen)
	}

	// Secrets: the run's JWT and the server's signing key are in no exec
	// URL (audit log), and the signing key reached no command.
	jwt := env["PAPERCLIP_API_KEY"]
	signing := serverEnvValue(t, srv.Dir, "PAPERCLIP_AGENT_JWT_SECRET")
	audit := readFile(t, sw.c.AuditLogPath())
	execs := countExecs(t, sw.c, sw.ns)
	if execs == 0 {
		t.Errorf("no pod exec of namespace %s in the audit log %s: the check below proves nothing", sw.ns, sw.c.AuditLogPath())
	}
	for name, v := range map[string]string{"the run JWT": jwt, "the server's JWT signing key": signing, "the prompt": prompt} {
		if v == "" {
			continue
		}
		if strings.Contains(audit, v) {
			t.Errorf("%s is in the API server's audit log", name)
		}
		if strings.Contains(sw.daemon.out.String(), v) {
			t.Errorf("%s is in the daemon's log", name)
		}
	}
	if signing != "" && !strings.Contains(sw.daemon.out.String(), "PAPERCLIP_AGENT_JWT_SECRET") {
		t.Logf("note: the daemon logged no kept-back PAPERCLIP_AGENT_JWT_SECRET (Paperclip sent it in no execute)")
	}
	t.Logf("%d pod execs in the audit log for 2 runs and the probe", execs)
}

// loggedFor says a line of log has msg and id.
func loggedFor(log, msg, id string) bool {
	for line := range strings.Lines(log) {
		if strings.Contains(line, msg) && strings.Contains(line, id) {
			return true
		}
	}
	return false
}

// stockFigures are the figures Paperclip books for a transcript that its
// stock claude_local adapter parsed: its input tokens count the cache
// writes too (pcsync's own parser counts them apart).
func stockFigures(t testing.TB, tr transcript) runFigures {
	t.Helper()
	f := tr.figures()
	for _, line := range tr.Lines {
		var m struct {
			Type       string `json:"type"`
			ModelUsage map[string]struct {
				CacheCreationInputTokens int64 `json:"cacheCreationInputTokens"`
			} `json:"modelUsage"`
		}
		if json.Unmarshal([]byte(line), &m) == nil && m.Type == "result" {
			for _, u := range m.ModelUsage {
				f.InputTokens += u.CacheCreationInputTokens
			}
		}
	}
	return f
}

// countExecs counts the audit log's finished pod exec requests in a
// namespace.
func countExecs(t testing.TB, c *testcluster.Cluster, ns string) int {
	t.Helper()
	evs, err := c.AuditEvents(func(ev testcluster.AuditEvent) bool {
		return ev.ObjectRef != nil && ev.ObjectRef.Namespace == ns && ev.ObjectRef.Subresource == "exec"
	})
	if err != nil {
		t.Fatal(err)
	}
	return len(evs)
}

func readFile(t testing.TB, p string) string {
	t.Helper()
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// serverEnvValue reads a key of the Paperclip instance's .env (empty if it
// has none).
func serverEnvValue(t testing.TB, dataDir, key string) string {
	t.Helper()
	matches, _ := filepath.Glob(filepath.Join(dataDir, "instances", "*", ".env"))
	for _, m := range matches {
		data, err := os.ReadFile(m)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(data), "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), key+"="); ok {
				return strings.Trim(v, `"'`)
			}
		}
	}
	return ""
}

// waitPodsGone waits until no lease pod is left in the namespace and
// returns how long after start that was.
func (sw *sandboxWorld) waitPodsGone(t testing.TB, start time.Time, within time.Duration) time.Duration {
	t.Helper()
	sw.waitNoPods(t, within)
	return time.Since(start)
}

// waitLeasePod waits until a lease pod of the namespace runs and returns its
// name.
func (sw *sandboxWorld) waitLeasePod(t testing.TB, within time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		pods, err := sw.c.Client().CoreV1().Pods(sw.ns).List(context.Background(), leasePodsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil {
				return p.Name
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no lease pod in %s within %s", sw.ns, within)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestSandboxCancel: cancelling a run in Paperclip ends its lease with
// cancelActiveWork: the CLI's process is killed, the pod is deleted and
// gone, and Paperclip shows the run cancelled.
func TestSandboxCancel(t *testing.T) {
	srv := sharedServer(t)
	tr := readTranscript(t, "claude-obers-small-success.jsonl")
	sw := newSandboxWorld(t, srv, sandboxOptions{})
	sleeper := sw.sandboxAgent(t, "Sleeper", "claude_local", tr, map[string]string{"STANDIN_SLEEP": "600"}, nil)
	run := srv.API.wake(t, sleeper.ID, "e2e: sandbox cancel")
	pid := sw.pc.standinPid(strings.ToLower(run.ID))
	pod := sw.waitLeasePod(t, time.Minute)
	begin := time.Now()
	srv.API.cancel(t, run.ID)
	got := srv.API.waitRun(t, run.ID, time.Minute)
	if got.Status != "cancelled" {
		t.Errorf("run %s: status %s, want cancelled (error %q)", run.ID, got.Status, str(got.Error))
	}
	took := sw.waitPodsGone(t, begin, time.Minute)
	t.Logf("cancel → lease pod %s gone: %s", pod, took.Round(time.Millisecond))
	waitPidGone(t, pid, 30*time.Second)
}

// TestSandboxTimeout: a run past its timeoutSec has its command's whole
// process group killed in the pod and ends timed_out in Paperclip.
func TestSandboxTimeout(t *testing.T) {
	srv := sharedServer(t)
	tr := readTranscript(t, "claude-obers-small-success.jsonl")
	sw := newSandboxWorld(t, srv, sandboxOptions{})
	slow := sw.sandboxAgent(t, "Slow", "claude_local", tr, map[string]string{"STANDIN_SLEEP": "600"}, map[string]any{"timeoutSec": 4})
	run := srv.API.wake(t, slow.ID, "e2e: sandbox timeout")
	pid := sw.pc.standinPid(strings.ToLower(run.ID))
	got := srv.API.waitRun(t, run.ID, 3*time.Minute)
	if got.Status != "timed_out" {
		t.Errorf("run %s: status %s, want timed_out (errorCode %q, error %q)", run.ID, got.Status, str(got.ErrorCode), str(got.Error))
	}
	waitPidGone(t, pid, 30*time.Second)
	sw.waitNoPods(t, time.Minute)
}

// TestSandboxCodexRun: a second stock adapter, codex_local (engine cli),
// runs in the environment and ends succeeded with the transcript's usage.
func TestSandboxCodexRun(t *testing.T) {
	srv := sharedServer(t)
	tr := readTranscript(t, "codex-docs-readme-check.jsonl")
	sw := newSandboxWorld(t, srv, sandboxOptions{})
	// The adapter refuses to start codex with no credentials; the stand-in
	// needs none.
	coder := sw.sandboxAgent(t, "Codex", "codex_local", tr, map[string]string{"OPENAI_API_KEY": "sk-e2e-not-a-key"}, nil)
	run := srv.API.wake(t, coder.ID, "e2e: sandbox codex")
	got := waitSucceeded(t, srv, run.ID, "codex", 3*time.Minute)
	args, _, prompt := sw.pc.recorded(strings.ToLower(run.ID))
	if len(args) == 0 || args[0] != "exec" || prompt == "" {
		t.Errorf("codex got args %q and a prompt of %d bytes; want `codex exec …` with the prompt on stdin", args, len(prompt))
	}
	if num(got.UsageJSON, "outputTokens") <= 0 {
		t.Errorf("codex run booked no output tokens: %v", got.UsageJSON)
	}
	sw.waitNoPods(t, time.Minute)
}

// TestSandboxDaemonKilled: pcsync's daemon is SIGKILLed while a run's CLI
// runs in its lease. Paperclip fails the run with an error that names
// pcsync's daemon; the restarted daemon adopts the lease from its journal
// and ends it at its expiry: the pod is deleted and the CLI killed, nothing
// is left.
func TestSandboxDaemonKilled(t *testing.T) {
	srv := sharedServer(t)
	tr := readTranscript(t, "claude-obers-small-success.jsonl")
	sw := newSandboxWorld(t, srv, sandboxOptions{EnvConfig: map[string]any{"leaseTtlSec": 20}})
	sleeper := sw.sandboxAgent(t, "Sleeper", "claude_local", tr, map[string]string{"STANDIN_SLEEP": "600"}, nil)
	run := srv.API.wake(t, sleeper.ID, "e2e: sandbox daemon killed")
	pid := sw.pc.standinPid(strings.ToLower(run.ID))
	pod := sw.waitLeasePod(t, time.Minute)
	_ = sw.daemon.cmd.Process.Kill()
	<-sw.daemon.done
	got := srv.API.waitRun(t, run.ID, 3*time.Minute)
	if got.Status != "failed" || !strings.Contains(str(got.Error)+str(got.ErrorCode), "pcsync daemon") {
		stdout, _ := srv.API.runLog(t, run.ID)
		t.Errorf("run %s after the daemon died: %s, errorCode %q, error %q; want failed naming pcsync's daemon\n%s",
			run.ID, got.Status, str(got.ErrorCode), str(got.Error), tail(stdout, 2000))
	}
	if pidGone(pid) {
		t.Logf("note: the CLI %d ended with the daemon (the command server did not outlive it)", pid)
	}
	d2 := sw.pc.startDaemon("kubernetes", nil, sw.daemonArgs...)
	sw.waitNoPods(t, 2*time.Minute)
	waitPidGone(t, pid, 30*time.Second)
	if !strings.Contains(d2.out.String(), pod) {
		t.Errorf("the restarted daemon's log does not mention the lease %s it took over:\n%s", pod, tail(d2.out.String(), 4000))
	}
	// The daemon drops the lease from its journal just after the pod is gone.
	deadline := time.Now().Add(30 * time.Second)
	for {
		journal := readFile(t, filepath.Join(sw.pc.State, "sandbox-leases.json"))
		if !strings.Contains(journal, pod) {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("the lease journal still holds %s 30 s after its pod is gone:\n%s", pod, journal)
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestSandboxPaperclipGoesAway: Paperclip stops while a run's CLI runs in a
// lease; no lease pod outlives the lease's expiry.
func TestSandboxPaperclipGoesAway(t *testing.T) {
	tl := getTools(t)
	srv := startServer(t, tl)
	srv.installAdapter(t)
	tr := readTranscript(t, "claude-obers-small-success.jsonl")
	sw := newSandboxWorld(t, srv, sandboxOptions{EnvConfig: map[string]any{"leaseTtlSec": 20}})
	sleeper := sw.sandboxAgent(t, "Sleeper", "claude_local", tr, map[string]string{"STANDIN_SLEEP": "600"}, nil)
	run := srv.API.wake(t, sleeper.ID, "e2e: sandbox paperclip goes away")
	pid := sw.pc.standinPid(strings.ToLower(run.ID))
	sw.waitLeasePod(t, time.Minute)
	begin := time.Now()
	srv.Halt()
	took := sw.waitPodsGone(t, begin, 2*time.Minute)
	t.Logf("Paperclip stopped → lease pod gone: %s (lease TTL 20 s)", took.Round(time.Millisecond))
	waitPidGone(t, pid, 30*time.Second)
}

// TestSandboxRefusals: what cannot work is refused at once, with a message
// that names the field or the thing to fix, and nothing is created: an
// unknown company and an image that is not allowed (the environment's
// validation), a daemon that is not running, and a company whose quota is
// full (the probe and the run).
func TestSandboxRefusals(t *testing.T) {
	srv := sharedServer(t)
	sw := newSandboxWorld(t, srv, sandboxOptions{})
	create := func(cfg map[string]any) error {
		c := map[string]any{}
		for k, v := range sw.envCfg {
			c[k] = v
		}
		for k, v := range cfg {
			c[k] = v
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		var out map[string]any
		return srv.API.do(ctx, "POST", "/api/companies/"+sw.company.ID+"/environments",
			map[string]any{"name": fmt.Sprintf("bad %d", time.Now().UnixNano()), "driver": "sandbox", "config": c}, &out)
	}
	for _, tt := range []struct {
		name string
		cfg  map[string]any
		want string
	}{
		{"unknown company", map[string]any{"company": "nope"}, `config.company: no Company \"nope\" in the pcsync config`},
		{"image not allowed", map[string]any{"image": "evil.example/miner:1"}, `image \"evil.example/miner:1\" is not allowed`},
		{"a typo", map[string]any{"namespace": "x"}, "config.namespace: unknown field"},
		{"daemon down", map[string]any{"socketPath": filepath.Join(shortDir(t, "nod-"), "none.sock")}, "pcsync daemon not reachable at"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			begin := time.Now()
			err := create(tt.cfg)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("creating the environment: %v; want a refusal with %q", err, tt.want)
			}
			t.Logf("refused in %s", time.Since(begin).Round(time.Millisecond))
		})
	}

	// A full quota: the probe says so, and a run fails saying so; no pod.
	zero := map[string]any{"pods": 0}
	data, err := os.ReadFile(filepath.Join(sw.pc.Config, "company.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	doc["spec"].(map[string]any)["quota"] = zero
	// validate refuses a proxy-mode company whose quota cannot hold its
	// egress proxy's pod: the quota full at run time is a standard-mode one.
	doc["spec"].(map[string]any)["egress"] = map[string]any{"mode": "standard"}
	if data, err = yaml.Marshal(doc); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(sw.pc.Config, "company.yaml"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := runCmd(sw.pc.Config, nil, getTools(t).Pcsync, "apply", sw.pc.Config, "--kubeconfig", sw.c.KubeconfigPath(),
		"--applyset-namespace", sw.setNS, "--force-conflicts"); err != nil {
		t.Fatalf("pcsync apply: %v\n%s", err, out)
	}
	var probe map[string]any
	deadline := time.Now().Add(time.Minute)
	for {
		srv.API.must(t, "POST", "/api/environments/"+sw.envID+"/probe?companyId="+sw.company.ID, map[string]any{}, &probe)
		if b, _ := json.Marshal(probe); strings.Contains(string(b), "quota") || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond) // the quota controller fills in the quota's status
	}
	if ok, _ := probe["ok"].(bool); ok {
		t.Errorf("probe with a full quota: %v, want not ok", probe)
	}
	if b, _ := json.Marshal(probe); !strings.Contains(string(b), "quota") {
		t.Errorf("the probe does not say the quota is full: %s", b)
	}
	seen, _ := sw.leasePods()
	if len(seen) != 0 {
		t.Errorf("lease pods created by refused requests: %v", seen)
	}
}

// TestSandboxEnvironmentFromGit: a Company declares its sandbox environment
// and an agent that runs there (paperclip.manage, environments,
// agents[].paperclip.environment); `pcsync apply` creates the environment
// in Paperclip and the agent with its stock adapter type pointed at it; the
// agent's run succeeds in a lease pod; a second apply writes nothing; an
// environment edited by hand is put back.
func TestSandboxEnvironmentFromGit(t *testing.T) {
	srv := sharedServer(t)
	tr := readTranscript(t, "claude-obers-small-success.jsonl")
	sw := newSandboxWorld(t, srv, sandboxOptions{})
	path := filepath.Join(sw.pc.Config, "company.yaml")
	var doc map[string]any
	if err := yaml.Unmarshal([]byte(readFile(t, path)), &doc); err != nil {
		t.Fatal(err)
	}
	spec := doc["spec"].(map[string]any)
	spec["paperclip"] = map[string]any{"manage": true, "environments": []any{map[string]any{
		"name": "k8s-from-git", "socketPath": sw.envCfg["socketPath"], "envAllow": []any{"STANDIN_*"}, "timeoutMs": 120000,
	}}}
	// Its lease pods get its scheduling: Paperclip names it by id, the
	// daemon finds it by pcsync's marker.
	selector := map[string]any{"kubernetes.io/hostname": sw.c.NodeName()}
	toleration := map[string]any{"key": "pcsync.io/e2e-agents", "operator": "Exists", "effect": "NoSchedule"}
	spec["agents"] = []any{map[string]any{"name": "gitcoder", "adapter": "claude_local", "model": "claude-sonnet-4-6",
		"nodeSelector": selector, "tolerations": []any{toleration},
		"paperclip": map[string]any{"role": "engineer", "environment": "k8s-from-git", "adapterConfig": map[string]any{
			"engine": "cli", "timeoutSec": 120, "env": map[string]any{"STANDIN_TRANSCRIPT": tr.Path, "STANDIN_RECORD": sw.pc.Record},
		}}}}
	writeYAML(t, path, doc)
	spath := filepath.Join(sw.pc.Config, "settings.yaml")
	var sdoc map[string]any
	if err := yaml.Unmarshal([]byte(readFile(t, spath)), &sdoc); err != nil {
		t.Fatal(err)
	}
	sdoc["spec"].(map[string]any)["paperclip"] = map[string]any{"url": srv.URL, "spoolDir": sw.pc.Spool}
	writeYAML(t, spath, sdoc)

	apply := func() string {
		t.Helper()
		out, err := runCmd(sw.pc.Config, nil, getTools(t).Pcsync, "apply", sw.pc.Config, "--kubernetes=false")
		if err != nil {
			t.Fatalf("pcsync apply: %v", err)
		}
		return out
	}
	out := apply()
	for _, want := range []string{"paperclip environment " + sw.pc.Slug + "/k8s-from-git created", "paperclip agent " + sw.pc.Slug + "/gitcoder created"} {
		if !strings.Contains(out, want) {
			t.Errorf("pcsync apply says:\n%s\nwant a line %q", out, want)
		}
	}
	var envs []struct {
		ID     string         `json:"id"`
		Name   string         `json:"name"`
		Config map[string]any `json:"config"`
	}
	srv.API.must(t, "GET", "/api/companies/"+sw.company.ID+"/environments", nil, &envs)
	envID := ""
	for _, e := range envs {
		if e.Name == "k8s-from-git" {
			envID = e.ID
			if e.Config["provider"] != "pcsync" || e.Config["company"] != sw.pc.Slug {
				t.Errorf("environment config %v, want provider pcsync and company %s", e.Config, sw.pc.Slug)
			}
		}
	}
	if envID == "" {
		t.Fatalf("no environment k8s-from-git in Paperclip: %+v", envs)
	}
	var agents []struct {
		ID                   string `json:"id"`
		Name                 string `json:"name"`
		AdapterType          string `json:"adapterType"`
		DefaultEnvironmentID string `json:"defaultEnvironmentId"`
	}
	srv.API.must(t, "GET", "/api/companies/"+sw.company.ID+"/agents", nil, &agents)
	var coderID string
	for _, a := range agents {
		if a.Name == "gitcoder" {
			coderID = a.ID
			if a.AdapterType != "claude_local" || a.DefaultEnvironmentID != envID {
				t.Errorf("agent gitcoder: adapterType %q, defaultEnvironmentId %q; want claude_local, %s", a.AdapterType, a.DefaultEnvironmentID, envID)
			}
		}
	}
	if coderID == "" {
		t.Fatalf("no agent gitcoder in Paperclip")
	}
	// The daemon's probe hook (Paperclip's own probe of a sandbox
	// environment acquires a lease instead) says where gitcoder's leases go
	// once the daemon has loaded the config that declares it (it reloads on
	// its own time): wake the agent only then.
	wantWho := "a lease pod of agent gitcoder (image "
	wantWhere := "needs nodes kubernetes.io/hostname=" + sw.c.NodeName() + "; tolerating pcsync.io/e2e-agents:NoSchedule"
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(200 * time.Millisecond) {
		answer := daemonHook(t, sw.envCfg["socketPath"].(string), "probe", map[string]any{"config": map[string]any{"company": sw.pc.Slug}})
		if strings.Contains(answer, wantWho) && strings.Contains(answer, wantWhere) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the daemon's probe does not say %q … %q within a minute: %s", wantWho, wantWhere, answer)
		}
	}
	run := srv.API.wake(t, coderID, "e2e: agent and environment from Git")
	if got := srv.API.waitRun(t, run.ID, 3*time.Minute); got.Status != "succeeded" {
		t.Errorf("run %s of the agent from Git: %s (%q)", run.ID, got.Status, str(got.Error))
	}

	seen, _ := sw.leasePods()
	if len(seen) == 0 {
		t.Errorf("the run of the agent from Git made no lease pod")
	}
	for _, name := range seen {
		sw.mu.Lock()
		pod := sw.pods[name]
		sw.mu.Unlock()
		tolerates := slices.ContainsFunc(pod.Spec.Tolerations, func(t corev1.Toleration) bool { return t.Key == "pcsync.io/e2e-agents" })
		if pod.Spec.NodeSelector["kubernetes.io/hostname"] != sw.c.NodeName() || !tolerates {
			t.Errorf("lease pod %s: nodeSelector %v, tolerations %v; want agent gitcoder's (hostname %s, pcsync.io/e2e-agents)",
				name, pod.Spec.NodeSelector, pod.Spec.Tolerations, sw.c.NodeName())
		}
	}

	var live map[string]any
	srv.API.must(t, "GET", "/api/agents/"+coderID, nil, &live)
	diff, _ := json.Marshal(live["adapterConfig"])
	if out := apply(); !strings.Contains(out, "0 write requests") || !strings.Contains(out, "k8s-from-git unchanged") {
		t.Errorf("a second apply wrote something:\n%s\npcsync diff before it:\n%s", out, diff)
	}
	srv.API.must(t, "PATCH", "/api/environments/"+envID+"?companyId="+sw.company.ID, map[string]any{"config": map[string]any{
		"provider": "pcsync", "company": sw.pc.Slug, "socketPath": sw.envCfg["socketPath"], "envAllow": []any{"EVERYTHING_*"}, "timeoutMs": 120000}}, nil)
	if out := apply(); !strings.Contains(out, "k8s-from-git configured: config.envAllow") {
		t.Errorf("apply after a hand edit of the environment:\n%s\nwant it configured back (config.envAllow)", out)
	}
}

// daemonHook calls one hook of the daemon's sandbox API on its Unix socket,
// as pcsync's plugin does, and returns the answer's body.
func daemonHook(t testing.TB, socket, hook string, params map[string]any) string {
	t.Helper()
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", socket)
		}}}
	body, _ := json.Marshal(params)
	resp, err := hc.Post("http://pcsync/v1/hooks/"+hook, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatalf("sandbox API %s: %v", hook, err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("sandbox API %s: %v", hook, err)
	}
	return string(out)
}

func writeYAML(t testing.TB, path string, v any) {
	t.Helper()
	data, err := yaml.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}
