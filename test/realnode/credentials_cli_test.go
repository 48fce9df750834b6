//go:build integration

package realnode

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/pcsync/pcsync/internal/lib/agentpod"
	"github.com/pcsync/pcsync/internal/testing/lockedbuf"
	"github.com/pcsync/pcsync/internal/testing/testcluster"
	"github.com/pcsync/pcsync/internal/testing/testnet"
	"github.com/pcsync/pcsync/pkg/config"
	"github.com/pcsync/pcsync/pkg/egressproxy/agentenv"
	"github.com/pcsync/pcsync/pkg/egressproxy/allow"
	"github.com/pcsync/pcsync/pkg/egressproxy/spendkeep"
	"github.com/pcsync/pcsync/pkg/egressproxy/tokensync"
	"github.com/pcsync/pcsync/pkg/result"
	"github.com/pcsync/pcsync/pkg/runs/kubeexec"
	"github.com/pcsync/pcsync/pkg/runs/spool"
	"github.com/pcsync/pcsync/pkg/sandbox"
)

// cliEnv is TestRealCLIsThroughTheProxy's world: tenant a declares an
// anthropic and an openai credential, tenant b an openai credential whose
// upstream is the company's LLM gateway; the stand-in APIs in the test's
// network namespace; the daemon's executor, spool, token sync and sandbox
// Manager, their log kept.
type cliEnv struct {
	c            *testcluster.Cluster
	node         *testcluster.RealNode
	p            pushed
	nsA, nsB     string
	slugA, slugB string
	model        *config.Model
	api          *providerStandIns
	log          *lockedbuf.Buffer
	spool        string
	m            *sandbox.Manager
	// tokens are leases' tokens, which no log may hold either.
	tokens []string
}

// Paperclip agent ids of the test's agents (what Paperclip would send).
var cliAgentIDs = agentIDs{"claude-id": "claude", "codex-id": "codex"}

// TestRealCLIsThroughTheProxy: the real Claude Code and Codex CLIs, from
// pcsync's images, run on the real node with the enforcer on, in Job
// pods (spool runs) and lease pods (the sandbox Manager, their executes'
// env carrying Paperclip's keys as stock adapters' do). Each reaches its
// stand-in provider only through its tenant's egress proxy, which puts
// the credential's key in the provider's header; tenant b's Codex reaches
// the provider through the company's gateway, with the gateway's key. The
// runs succeed with the stand-ins' usage. Refused: another tenant's token,
// a token whose lease ended, the other tenant's proxy. No key is in any
// pod's processes, files or spec, the results, the logs, or the audit log.
func TestRealCLIsThroughTheProxy(t *testing.T) {
	e := newCLIEnv(t, "", "", "")
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	e.startDaemon(ctx, t)
	e.checkJobRuns(ctx, t)
	leaseA := e.acquire(ctx, t, e.slugA, "claude_local", "claude-id")
	claudeOut := e.execute(ctx, t, leaseA, "claude", []string{"-p", "say hi", "--output-format", "stream-json", "--verbose"}, nil,
		map[string]string{"ANTHROPIC_API_KEY": paperclipKey, "ANTHROPIC_BASE_URL": "https://api.anthropic.com"})
	checkCLIOutput(t, "claude in a lease", claudeOut, standInAnthropicText, fmt.Sprint(`"input_tokens":`, standInAnthropicIn))
	codexA := e.acquire(ctx, t, e.slugA, "codex_local", "codex-id")
	// As Paperclip runs a CLI in a lease: inside a shell script (its log
	// tee), whose argv pcsync cannot extend; codex finds its base URL in
	// the system config the daemon writes into the pod.
	codexOut := e.execute(ctx, t, codexA, "sh", append([]string{"-c", `codex "$@" | tee /tmp/codex.log`, "sh"}, codexArgs...),
		strp("say hi"), paperclipOpenAIEnv)
	checkCLIOutput(t, "codex in a lease", codexOut, standInOpenAIText, fmt.Sprint(`"input_tokens":`, standInOpenAIIn))
	codexB := e.acquire(ctx, t, e.slugB, "codex_local", "codex-id")
	// A command line the daemon extends (-c openai_base_url).
	gwOut := e.execute(ctx, t, codexB, "codex", codexArgs, strp("say hi"), paperclipOpenAIEnv)
	checkCLIOutput(t, "codex in a lease, through the gateway", gwOut, standInOpenAIText, fmt.Sprint(`"input_tokens":`, standInOpenAIIn))
	e.checkProvidersGotKeys(t)
	e.checkTokensRefused(ctx, t, leaseA, codexA, codexB)
	e.checkKeysNowhere(ctx, t, codexA)
}

var (
	codexArgs          = []string{"exec", "--json", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox", "-"}
	paperclipOpenAIEnv = map[string]string{"CODEX_API_KEY": paperclipOpenAIKey, "OPENAI_API_KEY": paperclipOpenAIKey}
)

func strp(s string) *string { return &s }

// newCLIEnv creates the tenants' namespaces and Secrets, applies the
// tenants and starts the stand-ins, the proxies Running and firewalled.
// Tenant a's claude and codex agents get claudeA's and codexA's fields
// beside their name and adapter, and its spec specA's lines.
func newCLIEnv(t *testing.T, claudeA, codexA, specA string) *cliEnv {
	t.Helper()
	c := testcluster.Get(t)
	e := &cliEnv{c: c, node: c.RealNode(), p: pushImages(t), api: newProviderStandIns(), log: &lockedbuf.Buffer{}, spool: t.TempDir()}
	if !e.node.NetworkPolicy() {
		t.Fatal("the real node does not enforce NetworkPolicies: TestMain sets RealNodeOptions.NetworkPolicy")
	}
	pushCodexImage(t, e.p)
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	e.nsA, e.nsB = c.Namespace(t, "cli", nil), c.Namespace(t, "cli", nil)
	e.slugA, e.slugB = e.nsA[strings.LastIndexByte(e.nsA, '-')+1:], e.nsB[strings.LastIndexByte(e.nsB, '-')+1:]
	tn := newTestNet(ctx, t)
	ln, err := tn.Listen("tcp4", testnet.PublicAddress+":443")
	if err != nil {
		t.Fatal(err)
	}
	srv, caPEM, err := testnet.ServeHTTPSPEM(ln, []string{"api.anthropic.com", "api.openai.com", gatewayHost}, e.api)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	e.createSecrets(ctx, t, string(caPEM))
	e.writeConfig(t, e.nsA[:strings.LastIndexByte(e.nsA, '-')+1], claudeA, codexA, specA)
	applyTenant(ctx, t, c, e.model)
	proxies := map[string]*corev1.Pod{}
	for _, ns := range []string{e.nsA, e.nsB} {
		proxies[ns] = waitRunning(ctx, t, c, ns, agentpod.LabelRole+"="+agentpod.RoleEgressProxy)
	}
	// (the node's pod bridge exists once a pod runs)
	if err := tn.Forward(e.node.PodBridge()); err != nil {
		t.Fatal(err)
	}
	if err := tn.CheckRoute(ctx, testnet.PublicAddress); err != nil {
		t.Fatalf("send nothing: %v", err)
	}
	for ns, proxy := range proxies {
		if err := e.node.WaitFirewalled(ctx, ns, proxy.Name); err != nil {
			t.Fatal(err)
		}
		if err := tn.CheckRouteFrom(ctx, testnet.PublicAddress, proxy.Status.PodIP, e.node.PodBridge()); err != nil {
			t.Fatalf("send nothing: %v", err)
		}
		// The runs reach the proxy through its Service, which routes to it
		// once its EndpointSlice says so: after its readiness probe (every
		// 5 s) passes, which Running does not imply.
		waitProxyEndpoint(ctx, t, c.Client(), ns, proxy.Status.PodIP, time.Minute)
	}
	return e
}

// waitProxyEndpoint waits up to within for the EndpointSlice of ns's egress
// proxy Service to list ip as a ready endpoint. (kube-proxy then programs
// the node from it, well within the seconds a run's pod takes to start.)
func waitProxyEndpoint(ctx context.Context, t *testing.T, cs kubernetes.Interface, ns, ip string, within time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	sel := discoveryv1.LabelServiceName + "=" + allow.ProxyName
	last := "no EndpointSlice"
	for {
		l, err := cs.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: sel})
		if err != nil {
			last = err.Error()
		} else if readyAt(l.Items, ip) {
			return
		} else if len(l.Items) > 0 {
			last = describeEndpoints(l.Items)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("Service %s/%s: waited %s for a ready endpoint at %s (the proxy pod): %v; last seen: %s",
				ns, allow.ProxyName, within, ip, context.Cause(ctx), last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// describeEndpoints lists the slices' endpoints, each with its readiness,
// for a failure message.
func describeEndpoints(items []discoveryv1.EndpointSlice) string {
	var eps []string
	for _, s := range items {
		for _, ep := range s.Endpoints {
			eps = append(eps, fmt.Sprintf("%v ready=%v", ep.Addresses, ep.Conditions.Ready != nil && *ep.Conditions.Ready))
		}
	}
	return fmt.Sprintf("%d EndpointSlices, endpoints %v", len(items), eps)
}

// readyAt says one of items lists ip as a ready endpoint.
func readyAt(items []discoveryv1.EndpointSlice, ip string) bool {
	for _, s := range items {
		for _, ep := range s.Endpoints {
			if ep.Conditions.Ready != nil && *ep.Conditions.Ready && slices.Contains(ep.Addresses, ip) {
				return true
			}
		}
	}
	return false
}

// createSecrets creates each tenant's key Secret and the stand-ins' CA.
func (e *cliEnv) createSecrets(ctx context.Context, t *testing.T, caPEM string) {
	t.Helper()
	cs := e.c.Client()
	secrets := map[string]*corev1.Secret{
		e.nsA: {ObjectMeta: metav1.ObjectMeta{Name: "model-keys"}, StringData: map[string]string{"anthropic": cliAnthropicKey, "openai": cliOpenAIKey}},
		e.nsB: {ObjectMeta: metav1.ObjectMeta{Name: "gateway-keys"}, StringData: map[string]string{"master": gatewayKey, "anthropic": refusedKey}},
	}
	for ns, s := range secrets {
		if _, err := cs.CoreV1().Secrets(ns).Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		ca := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "test-ca"}, Data: map[string]string{"ca.pem": caPEM}}
		if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, ca, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// writeConfig writes and loads the config of both tenants: pcsync's real
// images; agents and proxies on the real node; each proxy resolving the
// stand-ins' names to the test's network namespace and trusting its CA.
// specA follows tenant a's credentials (spec's fields at its indent).
func (e *cliEnv) writeConfig(t *testing.T, prefix, claudeA, codexA, specA string) {
	t.Helper()
	dir := t.TempDir()
	pl := placementOf(e.node)
	settings := testSettings(prefix, e.p.RealRegistry, e.node, "{cpu: '1', memory: 1Gi}")
	a := cliCompany(e.slugA, pl, "    - {name: claude, provider: anthropic, secretRef: {name: model-keys, key: anthropic}}\n"+
		"    - {name: codex, provider: openai, secretRef: {name: model-keys, key: openai}}\n"+specA,
		pl.Agent("name: claude, adapter: claude_local"+claudeA)+pl.Agent("name: codex, adapter: codex_local"+codexA))
	b := cliCompany(e.slugB, pl, "    - {name: codex, provider: openai, secretRef: {name: gateway-keys, key: master}, gatewayUrl: 'https://"+gatewayHost+"'}\n"+
		"    - {name: claude, provider: anthropic, secretRef: {name: gateway-keys, key: anthropic}}\n",
		pl.Agent("name: codex, adapter: codex_local")+pl.Agent("name: claude, adapter: claude_local"))
	for name, text := range map[string]string{"settings.yaml": settings, "a.yaml": a, "b.yaml": b} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	m, err := loadConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	e.model = m
}

// cliCompany is a Company of the test: its credentials and agents, its
// egress proxy on the real node with the stand-ins' names.
func cliCompany(slug string, pl placement, credentials, agents string) string {
	return fmt.Sprintf("apiVersion: pcsync.io/v1alpha1\nkind: Company\nmetadata: {name: %q}\nspec:\n  id: company-%s\n"+
		"  credentials:\n%s  agents:\n%s  patches:\n%s", slug, slug, credentials, agents,
		proxyPatch(pl, []string{"api.anthropic.com", "api.openai.com", gatewayHost}, true, ""))
}

// startDaemon starts what the daemon runs: the Job executor and spool,
// the proxies' token sync, and the sandbox Manager, logging to e.log.
func (e *cliEnv) startDaemon(ctx context.Context, t *testing.T) {
	t.Helper()
	logger := slog.New(slog.NewTextHandler(io.MultiWriter(testWriter{t}, e.log), &slog.HandlerOptions{Level: slog.LevelDebug}))
	cs := e.c.Client()
	addrs := agentenv.NewAddresses(cs)
	if err := addrs.Start(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := tokensync.New(cs, tokensync.Options{Logger: logger}).Run(ctx); err != nil {
		t.Fatal(err)
	}
	if err := spendkeep.New(cs, spendkeep.Options{Logger: logger}).Run(ctx); err != nil {
		t.Fatal(err)
	}
	opts := kubeexec.DefaultOptions()
	opts.StateDir, opts.Logger, opts.ProxyAddresses = t.TempDir(), logger, addrs
	opts.Environ = func() []string { return []string{"ANTHROPIC_API_KEY=" + daemonKey, "PATH=/usr/bin"} }
	runCtx, cancel := context.WithCancel(context.Background())
	ex, err := kubeexec.New(runCtx, e.c.RESTConfig(), opts)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	do := spool.DefaultOptions(e.spool)
	do.StateDir, do.Logger, do.RescanInterval = opts.StateDir, logger, 500*time.Millisecond
	d, err := spool.New(e.model, ex, do)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- d.Run(runCtx) }()
	t.Cleanup(func() { cancel(); <-done })
	so := sandbox.DefaultOptions(t.TempDir())
	so.Pool.Lease.Namespace = "default" // the pools' Lease: a namespace every cluster has
	so.ReadyTimeout, so.Agents, so.ProxyAddresses, so.Logger = 4*time.Minute, cliAgentIDs, addrs, logger
	if e.m, err = sandbox.New(ctx, e.c.RESTConfig(), func() *config.Model { return e.model }, so); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.m.Close)
}

// checkJobRuns drops a run of each CLI into the spool, tenant b's Codex
// through the gateway, and wants each result to succeed with its
// stand-in's figures.
func (e *cliEnv) checkJobRuns(ctx context.Context, t *testing.T) {
	t.Helper()
	runs := []struct {
		name, company, agent string
		in, out              int64
		text                 string
	}{
		{"claude-job", e.slugA, "claude", standInAnthropicIn, standInAnthropicOut, standInAnthropicText},
		{"codex-job", e.slugA, "codex", standInOpenAIIn, standInOpenAIOut, standInOpenAIText},
		{"gateway-job", e.slugB, "codex", standInOpenAIIn, standInOpenAIOut, standInOpenAIText},
	}
	for _, r := range runs {
		dropAgentRun(t, e.spool, r.name, r.company, r.agent, "say hi")
	}
	dropAgentRun(t, e.spool, "refused-job", e.slugB, "claude", "say hi")
	for _, r := range runs {
		got := waitResult(ctx, t, e.spool, r.name)
		log, _ := os.ReadFile(filepath.Join(e.spool, r.name+".log"))
		t.Logf("%s: %s, usage %+v, summary %q", r.name, got.Status, got.Usage, deref(got.Summary))
		if got.Status != result.StatusSucceeded || got.Usage == nil || got.Usage.InputTokens != r.in || got.Usage.OutputTokens != r.out ||
			got.Summary == nil || !strings.Contains(*got.Summary, r.text) {
			b, _ := json.Marshal(got)
			t.Errorf("%s: result %s; want success with the stand-in's usage %d/%d and its text; log:\n%s", r.name, b, r.in, r.out, log)
		}
	}
	// The provider refuses tenant b's anthropic key: the run fails at once,
	// its result naming the credential.
	got := waitResult(ctx, t, e.spool, "refused-job")
	t.Logf("refused-job: %s, %s", got.Status, deref(got.ErrorMessage))
	if want := "the credential " + e.slugB + "/claude was refused"; got.Status != result.StatusFailed || !strings.Contains(deref(got.ErrorMessage), want) {
		b, _ := json.Marshal(got)
		t.Errorf("refused-job: result %s; want failed, its error saying %q", b, want)
	}
}

// dropAgentRun writes a run request of agent into the spool, atomically.
func dropAgentRun(t *testing.T, spoolDir, name, company, agent, prompt string) {
	t.Helper()
	data, err := json.Marshal(map[string]any{"apiVersion": config.APIVersion, "kind": "Run",
		"company": company, "agent": agent, "prompt": prompt})
	if err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(spoolDir, "."+name+".tmp")
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(spoolDir, name+".json")); err != nil {
		t.Fatal(err)
	}
}

// acquire takes a lease of the company's agent, firewalled.
func (e *cliEnv) acquire(ctx context.Context, t *testing.T, company, adapter, agentID string) sandbox.LeaseInfo {
	t.Helper()
	info, err := e.m.Acquire(ctx, sandbox.AcquireParams{Config: sandbox.EnvironmentConfig{Company: company},
		AdapterType: adapter, AgentID: agentID, RunID: "cli-" + company + "-" + adapter})
	if err != nil {
		t.Fatalf("acquire %s of %s: %v", adapter, company, err)
	}
	t.Cleanup(func() { _, _ = e.m.Release(context.Background(), sandbox.ReleaseParams{ID: info.ID, Cancel: true}) })
	ns := e.model.Namespace(mustCompany(t, e.model, company))
	if err := e.node.WaitFirewalled(ctx, ns, info.ID); err != nil {
		t.Fatal(err)
	}
	return info
}

func mustCompany(t *testing.T, m *config.Model, slug string) *config.Company {
	t.Helper()
	c, ok := m.Company(slug)
	if !ok {
		t.Fatalf("no company %s", slug)
	}
	return c
}

// execute runs a command in the lease and returns its stdout; a failed
// command fails the test.
func (e *cliEnv) execute(ctx context.Context, t *testing.T, l sandbox.LeaseInfo, cmd string, args []string, stdin *string, env map[string]string) string {
	t.Helper()
	r, err := e.m.Execute(ctx, sandbox.ExecParams{LeaseID: l.ID, Command: cmd, Args: args, Stdin: stdin, Env: env, Timeout: 2 * time.Minute}, nil)
	if err != nil {
		t.Fatalf("execute %s in lease %s: %v", cmd, l.ID, err)
	}
	if code(r) != 0 {
		t.Fatalf("execute %s in lease %s: exit %d\nstdout:\n%s\nstderr:\n%s", cmd, l.ID, code(r), r.Stdout, r.Stderr)
	}
	return r.Stdout
}

// checkCLIOutput wants a CLI's stdout to hold the stand-in's answer and
// its usage.
func checkCLIOutput(t *testing.T, what, out string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("%s: output without %q:\n%s", what, w, out)
		}
	}
}
