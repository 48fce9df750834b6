//go:build integration

package monitoring

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/pcsync/pcsync/internal/testing/testcluster"
	"github.com/pcsync/pcsync/pkg/egressproxy"
	"github.com/pcsync/pcsync/pkg/result"
)

// One control plane for the package's integration tests.
func TestMain(m *testing.M) { os.Exit(testcluster.Main(m)) }

// waitDeadline bounds each wait of the scenario.
const waitDeadline = 3 * time.Minute

// burst is how many runs the scenario drops per company.
const burst = 6

// TestPrometheusScrapesDaemon: Debian's Prometheus, with rules.yaml,
// scrapes the real `pcsync daemon` (built from ./cmd/pcsync, --executor
// kubernetes --prune --sandbox) on the test control plane every second,
// while the test drives it:
//
//   - a run burst (burst runs per company for two companies, concurrency
//     2): runs queued, in flight, finished, tokens and cost move;
//   - a warm pool of one member in the first company, Ready before the
//     lease, claimed by it (a warm claim) and refilled;
//   - a lease: acquired (leases active 1), a file synced in and out, two
//     executes with env keys the env rule keeps from the pod, the lease's
//     command stream broken (its exec process killed) and reopened, a
//     refused acquire, a drained release (leases active 0);
//   - every company removed from Git: the prune guard holds the empty
//     render, and the alert PcsyncPruneBlocked fires, read back from
//     Prometheus' alerts API.
//
// Each step's metric is read back from Prometheus' query API. Then every
// metric the rules and the dashboard name is on the daemon's /metrics,
// every dashboard query and rule evaluates on the real Prometheus without
// error.
func TestPrometheusScrapesDaemon(t *testing.T) {
	prometheus := tool(t, "prometheus")
	c := testcluster.Get(t)
	bin := buildPcsync(t)
	ctx := context.Background()

	// Two tenants whose namespaces the test cluster makes (and deletes):
	// the company slugs are their random suffixes, the prefix "mon-".
	sys := c.Namespace(t, "monsys", nil)
	var slugs []string
	for range 2 {
		ns := c.Namespace(t, "mon", nil)
		slug := strings.TrimPrefix(ns, "mon-")
		slugs = append(slugs, slug)
		// pcsync applies only namespaces it made, or was told to adopt.
		patch := fmt.Sprintf(`{"metadata":{"annotations":{"pcsync.io/adopt":%q}}}`, slug)
		if _, err := c.Client().CoreV1().Namespaces().Patch(ctx, ns, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	cfgDir, spool, state := t.TempDir(), t.TempDir(), t.TempDir()
	// The kwok lease's command server runs on this host under hostDir, and
	// is stopped with it when the test ends.
	hostDir := testcluster.HostDir(t, "mon-")
	lines := transcript(t)
	for _, slug := range slugs {
		if _, err := c.ServeLogs(ctx, "mon-"+slug, nil, lines); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.ServeExec(ctx, "mon-"+slugs[0], testcluster.ExecOptions{WorkDir: hostDir,
		Env: map[string]string{"PATH": "/usr/local/bin:/usr/bin:/bin"}}); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(cfgDir, "settings.yaml"), `apiVersion: pcsync.io/v1alpha1
kind: Settings
metadata: {name: monitoring}
spec:
  namespacePrefix: mon-
  images: {allowList: ["ghcr.io/paperclipai/*"]}
`)
	for i, slug := range slugs {
		doc := company(slug)
		if i == 0 {
			doc += "  sandbox:\n    warmPool:\n    - {adapterType: claude_local, count: 1}\n"
		}
		writeFile(t, filepath.Join(cfgDir, slug+".yaml"), doc)
	}

	d := startDaemon(t, bin, c.KubeconfigPath(), "daemon", "--executor", "kubernetes", "--config", cfgDir,
		"--spool", spool, "--state-dir", state, "--metrics-bind-address", "127.0.0.1:0",
		"--prune", "--applyset", "pcsync", "--applyset-namespace", sys, "--interval", "1h", "--debounce", "200ms",
		"--rescan-interval", "500ms",
		"--sandbox", "--sandbox-host-root", hostDir, "--sandbox-server-path", bin,
		"--sandbox-socket", filepath.Join(state, "sandbox.sock"))
	p := startPrometheus(t, prometheus, d.addr)
	p.wait(t, "Prometheus scrapes the daemon", `up{job="pcsync-metrics"}`, eq(1))
	p.wait(t, "the first reconcile", `pcsync_reconcile_last_success_timestamp_seconds`, gt(0))
	for _, slug := range slugs {
		waitFor(t, "tenant "+slug+" applied", func() bool {
			_, err := c.Client().CoreV1().ServiceAccounts("mon-"+slug).Get(ctx, "paperclip-tenant-sa", metav1.GetOptions{})
			return err == nil
		})
	}

	// A run burst.
	var names []string
	for _, slug := range slugs {
		for i := range burst {
			name := fmt.Sprintf("%s-%02d", slug, i)
			names = append(names, name)
			drop(t, spool, name, slug)
		}
	}
	waitFor(t, "every run's result", func() bool {
		for _, n := range names {
			if _, err := os.Lstat(filepath.Join(spool, n+result.Suffix)); err != nil {
				return false
			}
		}
		return true
	})
	total := float64(len(names))
	p.wait(t, "runs_total", `sum(pcsync_runs_total)`, eq(total))
	p.wait(t, "the runs' status", `sum(pcsync_runs_total{status="succeeded"})`, eq(total))
	p.expect(t, "runs were in flight", `max_over_time(pcsync_runs_in_flight[10m])`, gt(0))
	p.expect(t, "runs waited for a slot", `max_over_time(pcsync_runs_queued[10m])`, gt(0))
	// A run leaves the in-flight count after its Job is deleted, which follows
	// its result.
	p.wait(t, "none in flight now", `pcsync_runs_in_flight`, eq(0))
	for _, slug := range slugs {
		p.wait(t, "tokens of "+slug, fmt.Sprintf(`sum(pcsync_tokens_total{company=%q})`, slug), gt(0))
		p.wait(t, "cost of "+slug, fmt.Sprintf(`sum(pcsync_cost_usd_total{company=%q})`, slug), gt(0))
	}
	p.expect(t, "the start window", `pcsync_start_window`, gt(0))

	// A lease, from the first company's warm pool of one.
	pool := func(metric string) string { return fmt.Sprintf(`pcsync_sandbox_pool_%s{company=%q}`, metric, slugs[0]) }
	p.wait(t, "the pool declared", pool("declared"), eq(1))
	p.wait(t, "the pool's member Ready", pool("ready"), eq(1))
	sb := sandboxClient(filepath.Join(state, "sandbox.sock"))
	env := map[string]any{"company": slugs[0]}
	var lease struct {
		ProviderLeaseID string         `json:"providerLeaseId"`
		Metadata        map[string]any `json:"metadata"`
	}
	sb.call(t, "acquireLease", map[string]any{"driverKey": "pcsync", "config": env, "runId": "run-mon-1",
		"adapterType": "claude_local"}, http.StatusOK, &lease)
	if lease.ProviderLeaseID == "" {
		t.Fatal("acquireLease gave no lease id")
	}
	leased := fmt.Sprintf(`pcsync_sandbox_leases_active{company=%q}`, slugs[0])
	p.wait(t, "the lease held", leased, eq(1))
	p.wait(t, "an acquire ready", `pcsync_sandbox_acquire_duration_seconds_count{outcome="ready"}`, eq(1))
	p.wait(t, "a warm claim", fmt.Sprintf(`pcsync_sandbox_pool_claims_total{company=%q,outcome="warm"}`, slugs[0]), eq(1))
	p.wait(t, "the pool refilled", pool("ready"), eq(1))
	p.wait(t, "two members' refill times", `pcsync_sandbox_pool_refill_seconds_count`, eq(2))
	p.wait(t, "the daemon keeping its owner's pools", `pcsync_sandbox_pool_acting`, eq(1))
	// A workspace sync: a file in, and back out.
	target := filepath.Join(hostDir, "synced.txt") // kwok: the lease's commands run on this host
	sb.syncPut(t, lease.ProviderLeaseID, target, "synced\n")
	if got := sb.syncGet(t, lease.ProviderLeaseID, target); got != "synced\n" {
		t.Errorf("sync get %s: %q", target, got)
	}
	p.wait(t, "a sync in", fmt.Sprintf(`pcsync_sandbox_sync_bytes_total{company=%q,direction="in"}`, slugs[0]), eq(7))
	p.wait(t, "a sync out", fmt.Sprintf(`pcsync_sandbox_syncs_total{company=%q,direction="out",outcome="completed"}`, slugs[0]), eq(1))
	execEnv := map[string]string{"PATH": "/usr/bin:/bin", "MONITORING_DB_PASSWORD": "kept-out", "UNLISTED_KEY": "kept-out"}
	if out := sb.execute(t, lease.ProviderLeaseID, execEnv, "echo", "one"); out != "one\n" {
		t.Errorf("execute: stdout %q", out)
	}
	executes := fmt.Sprintf(`pcsync_sandbox_executes_total{company=%q,outcome="completed"}`, slugs[0])
	p.wait(t, "one execute", executes, eq(1))
	p.wait(t, "two env keys kept", fmt.Sprintf(`pcsync_sandbox_env_keys_kept_total{company=%q}`, slugs[0]), eq(2))
	// Break the command stream: kill the exec's process (`pcsync
	// sandbox-server attach` on this host, as kwok runs it); the daemon
	// reopens the stream.
	killAttach(t, filepath.Join(hostDir, lease.ProviderLeaseID))
	p.wait(t, "the stream reopened", `pcsync_sandbox_stream_reopens_total`, eq(1))
	if out := sb.execute(t, lease.ProviderLeaseID, execEnv, "echo", "two"); out != "two\n" {
		t.Errorf("execute after the reopen: stdout %q", out)
	}
	p.wait(t, "two executes", executes, eq(2))
	p.wait(t, "four env keys kept", fmt.Sprintf(`pcsync_sandbox_env_keys_kept_total{company=%q}`, slugs[0]), eq(4))
	p.expect(t, "execute durations", `pcsync_sandbox_execute_duration_seconds_count`, eq(2))
	// A refused acquire: an image the allow list does not allow.
	sb.call(t, "acquireLease", map[string]any{"driverKey": "pcsync", "runId": "run-mon-2", "adapterType": "claude_local",
		"config": map[string]any{"company": slugs[0], "image": "docker.io/library/busybox:1"}}, http.StatusUnprocessableEntity, nil)
	p.wait(t, "the refusal", `pcsync_sandbox_acquire_refusals_total{code="image_not_allowed"}`, eq(1))
	sb.call(t, "releaseLease", map[string]any{"driverKey": "pcsync", "providerLeaseId": lease.ProviderLeaseID,
		"leaseMetadata": lease.Metadata}, http.StatusOK, nil)
	p.wait(t, "the lease released", leased, eq(0))
	p.wait(t, "a drained release", `pcsync_sandbox_releases_total{reason="drained"}`, eq(1))

	// Every company removed from Git: an empty render, held.
	p.expect(t, "no prune held", `pcsync_prune_blocked`, eq(0))
	for _, slug := range slugs {
		if err := os.Remove(filepath.Join(cfgDir, slug+".yaml")); err != nil {
			t.Fatal(err)
		}
	}
	p.wait(t, "the prune held", `pcsync_prune_blocked`, eq(2))
	alert := p.waitAlert(t, "PcsyncPruneBlocked")
	if alert.Labels["severity"] != "warning" || alert.Labels["job"] != "pcsync-metrics" ||
		alert.Annotations["summary"] != "a prune of 2 tenants waits for approval" {
		t.Errorf("PcsyncPruneBlocked = %+v", alert)
	}
	for _, slug := range slugs {
		ns, err := c.Client().CoreV1().Namespaces().Get(ctx, "mon-"+slug, metav1.GetOptions{})
		if err != nil || ns.DeletionTimestamp != nil {
			t.Errorf("tenant %s was pruned while held: %v", slug, err)
		}
	}

	// Every metric the rules and the dashboard name is on /metrics, but
	// those of the tenants' egress proxies (pcsync egress-proxy, whose
	// /metrics TestEgressProxyCommand in cmd/pcsync scrapes) and resumes of
	// suspended leases, which have series by company once one resumed
	// (nothing suspends here; TestRulesPromtool evaluates its alert).
	exported := scrapeFamilies(t, d.addr)
	notHere := map[string]bool{egressproxy.RefusedTotalName: true, egressproxy.AllowedTotalName: true,
		"pcsync_egress_proxy_spend_month_cents": true, "pcsync_egress_proxy_budget_month_cents": true,
		"pcsync_sandbox_resumes_total": true}
	for _, n := range namedMetrics(t) {
		if !exported[n] && !notHere[n] {
			t.Errorf("the rules or the dashboard name %s, which the daemon's /metrics lacks", n)
		}
	}
	// Every rule evaluates, and every dashboard query runs.
	p.checkRules(t)
	for _, q := range dashboardQueries(t) {
		if _, err := p.query(q); err != nil {
			t.Errorf("dashboard query %s: %v", q, err)
		}
	}
}

// company is a Company document whose agent's Jobs succeed 2 s after they
// run (kwok) and log the test transcript: with concurrency 2, a burst of
// 6 keeps runs queued for about 4 s, seen by several of Prometheus'
// scrapes a second apart (at 300 ms the queue could come and go between
// two scrapes, and max_over_time of the queued gauge gave 0).
func company(slug string) string {
	return fmt.Sprintf(`apiVersion: pcsync.io/v1alpha1
kind: Company
metadata: {name: %q}
spec:
  id: company-%s
  agents:
  - name: coder
    adapter: claude_local
    model: claude-sonnet-4-6
    concurrency: 2
    labels: {sim.pcsync.io/outcome: succeed, sim.pcsync.io/delay-ms: "2000"}
    resources:
      requests: {cpu: 100m, memory: 128Mi}
      limits: {cpu: 100m, memory: 128Mi}
`, slug, slug)
}

// transcript is a claude_local stream-json transcript with usage and cost
// (the Kubernetes executor's test data), served as every run's log.
func transcript(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, "pkg/runs/kubeexec/testdata/claude-obers-small-success.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp")
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// drop writes a run request into the spool: a hidden temp file renamed in.
func drop(t *testing.T, spool, name, slug string) {
	t.Helper()
	data, err := json.Marshal(map[string]any{"apiVersion": "pcsync.io/v1alpha1", "kind": "Run", "company": slug,
		"agent": "coder", "prompt": "Summarise the repository's README in one sentence."})
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(spool, name+".json"), string(data))
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitDeadline)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// buildPcsync builds ./cmd/pcsync into a temp directory.
func buildPcsync(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "pcsync")
	build := exec.Command("go", "build", "-o", bin, "github.com/pcsync/pcsync/cmd/pcsync")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/pcsync: %v\n%s", err, out)
	}
	return bin
}

// process is a process the test started, with its output kept.
type process struct {
	cmd  *exec.Cmd
	mu   sync.Mutex
	out  bytes.Buffer
	addr string
}

func (p *process) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.Write(b)
}

func (p *process) log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

// start starts cmd with its output kept; the test's end stops it (SIGTERM,
// then SIGKILL), and the test binary's death kills it.
func start(t *testing.T, cmd *exec.Cmd) *process {
	t.Helper()
	p := &process{cmd: cmd}
	cmd.Stdout, cmd.Stderr = p, p
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	return p
}

var listenAddr = regexp.MustCompile(`msg="serving /metrics, /healthz and /readyz" address=(\S+)`)

// startDaemon starts `pcsync <args>` and returns once it serves /metrics.
func startDaemon(t *testing.T, bin, kubeconfig string, args ...string) *process {
	t.Helper()
	cmd := exec.Command(bin, append(args, "--kubeconfig", kubeconfig)...)
	cmd.Env = append(os.Environ(), "ANTHROPIC_API_KEY=sk-ant-monitoring-test")
	d := start(t, cmd)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("daemon log:\n%s", d.log())
		}
	})
	waitFor(t, "the daemon's metrics address", func() bool {
		if m := listenAddr.FindStringSubmatch(d.log()); m != nil {
			d.addr = m[1]
			return true
		}
		return false
	})
	return d
}

// prom is a Prometheus the test runs.
type prom struct {
	*process
	base string
}

// startPrometheus runs Prometheus on a free port of 127.0.0.1 with
// rules.yaml, scraping target as the job pcsync-metrics every second.
func startPrometheus(t *testing.T, bin, target string) *prom {
	t.Helper()
	dir := t.TempDir()
	rules, err := filepath.Abs(filepath.Join(monitoringDir, "rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf(`global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files: [%q]
scrape_configs:
- job_name: pcsync-metrics
  static_configs:
  - targets: [%q]
`, rules, target)
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	p := &prom{process: start(t, exec.Command(bin, "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+addr,
		"--web.console.templates="+dir, "--web.console.libraries="+dir)), base: "http://" + addr}
	waitFor(t, "Prometheus ready", func() bool {
		resp, err := http.Get(p.base + "/-/ready")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("Prometheus log:\n%s", p.log())
		}
	})
	return p
}

// api GETs a Prometheus API path and decodes its data.
func (p *prom) api(path string, params url.Values, data any) error {
	resp, err := http.Get(p.base + path + "?" + params.Encode())
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var r struct {
		Status string          `json:"status"`
		Error  string          `json:"error"`
		Data   json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return fmt.Errorf("%s: %w: %s", path, err, body)
	}
	if r.Status != "success" {
		return fmt.Errorf("%s: %s", path, r.Error)
	}
	return json.Unmarshal(r.Data, data)
}

// query runs an instant query and returns its samples' values.
func (p *prom) query(q string) ([]float64, error) {
	var data struct {
		Result []struct {
			Value [2]any `json:"value"`
		} `json:"result"`
	}
	if err := p.api("/api/v1/query", url.Values{"query": {q}}, &data); err != nil {
		return nil, err
	}
	var out []float64
	for _, r := range data.Result {
		s, _ := r.Value[1].(string)
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

type check struct {
	desc string
	ok   func(float64) bool
}

func eq(want float64) check {
	return check{fmt.Sprint("= ", want), func(v float64) bool { return v == want }}
}
func gt(min float64) check {
	return check{fmt.Sprint("> ", min), func(v float64) bool { return v > min }}
}

// wait polls q until it gives one value that passes c.
func (p *prom) wait(t *testing.T, what, q string, c check) {
	t.Helper()
	var last []float64
	var lastErr error
	deadline := time.Now().Add(waitDeadline)
	for {
		last, lastErr = p.query(q)
		if lastErr == nil && len(last) == 1 && c.ok(last[0]) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: Prometheus' %s gave %v (%v), want one value %s", what, q, last, lastErr, c.desc)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// expect checks q once.
func (p *prom) expect(t *testing.T, what, q string, c check) {
	t.Helper()
	got, err := p.query(q)
	if err != nil || len(got) != 1 || !c.ok(got[0]) {
		t.Errorf("%s: Prometheus' %s gave %v (%v), want one value %s", what, q, got, err, c.desc)
	}
}

type promAlert struct {
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
	State       string            `json:"state"`
	Value       string            `json:"value"`
}

// waitAlert waits until Prometheus' alerts API says the alert fires.
func (p *prom) waitAlert(t *testing.T, name string) promAlert {
	t.Helper()
	deadline := time.Now().Add(waitDeadline)
	var seen []promAlert
	for {
		var data struct {
			Alerts []promAlert `json:"alerts"`
		}
		if err := p.api("/api/v1/alerts", nil, &data); err == nil {
			seen = data.Alerts
			for _, a := range data.Alerts {
				if a.Labels["alertname"] == name && a.State == "firing" {
					return a
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("alert %s never fired; alerts: %+v", name, seen)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// checkRules fails for a rule Prometheus could not evaluate.
func (p *prom) checkRules(t *testing.T) {
	t.Helper()
	var data struct {
		Groups []struct {
			Rules []struct {
				Name      string `json:"name"`
				Health    string `json:"health"`
				LastError string `json:"lastError"`
			} `json:"rules"`
		} `json:"groups"`
	}
	if err := p.api("/api/v1/rules", nil, &data); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, g := range data.Groups {
		for _, r := range g.Rules {
			n++
			if r.Health != "ok" {
				t.Errorf("rule %s: health %q: %s", r.Name, r.Health, r.LastError)
			}
		}
	}
	if n != len(wantAlerts) {
		t.Errorf("Prometheus loaded %d rules, want %d", n, len(wantAlerts))
	}
}

// dashboardQueries are the dashboard's queries with Grafana's variables
// replaced as Grafana would: every job and company, a minute's rate
// interval, an hour's range.
func dashboardQueries(t *testing.T) []string {
	t.Helper()
	r := strings.NewReplacer("$__rate_interval", "1m", "$__range", "1h", "$job", ".*", "$company", ".*")
	var out []string
	for _, p := range readDashboard(t).Panels {
		for _, tg := range p.Targets {
			out = append(out, r.Replace(tg.Expr))
		}
	}
	return out
}

// scrapeFamilies returns the metric families on the daemon's /metrics
// that have a series.
func scrapeFamilies(t *testing.T, addr string) map[string]bool {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out := map[string]bool{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) >= 3 && f[0] == "#" && f[1] == "TYPE" {
			out[f[2]] = true
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// killAttach kills the `pcsync sandbox-server attach` process of the lease
// whose directory is leaseDir: the process of its command stream's exec,
// which kwok runs on this host. The command server it relays to lives on.
func killAttach(t *testing.T, leaseDir string) {
	t.Helper()
	socket := filepath.Join(leaseDir, "run", "cmd.sock")
	procs, err := filepath.Glob("/proc/[0-9]*/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	killed := 0
	for _, f := range procs {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		args := strings.Split(strings.TrimRight(string(data), "\x00"), "\x00")
		if len(args) < 3 || args[1] != "sandbox-server" || args[2] != "attach" || !strings.Contains(string(data), socket) {
			continue
		}
		pid, err := strconv.Atoi(filepath.Base(filepath.Dir(f)))
		if err != nil {
			continue
		}
		if err := syscall.Kill(pid, syscall.SIGKILL); err == nil {
			killed++
		}
	}
	if killed != 1 {
		t.Fatalf("killed %d attach processes of %s, want 1", killed, socket)
	}
}

// sandbox is a client of the daemon's sandbox API on its Unix socket.
type sandbox struct{ hc *http.Client }

func sandboxClient(socket string) *sandbox {
	return &sandbox{hc: &http.Client{Timeout: 2 * time.Minute, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", socket)
		}}}}
}

func (s *sandbox) post(t *testing.T, hook string, params any) (int, []byte) {
	t.Helper()
	body, err := json.Marshal(params)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := s.hc.Post("http://pcsync/v1/hooks/"+hook, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatalf("%s: %v", hook, err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}

// call posts a hook and decodes its answer into out (when set); the status
// must be want.
func (s *sandbox) call(t *testing.T, hook string, params any, want int, out any) {
	t.Helper()
	code, body := s.post(t, hook, params)
	if code != want {
		t.Fatalf("%s: status %d, want %d: %s", hook, code, want, body)
	}
	if out != nil {
		if err := json.Unmarshal(body, out); err != nil {
			t.Fatalf("%s: %v: %s", hook, err, body)
		}
	}
}

// syncPut writes content to the file target in the lease's pod by the
// native workspace sync.
func (s *sandbox) syncPut(t *testing.T, lease, target, content string) {
	t.Helper()
	head, err := json.Marshal(map[string]any{"lease": map[string]any{"providerLeaseId": lease},
		"targetPath": target, "kind": "file", "timeoutMs": 60000})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := s.hc.Post("http://pcsync/v1/sync/put", "application/octet-stream",
		io.MultiReader(bytes.NewReader(head), strings.NewReader("\n"+content)))
	if err != nil {
		t.Fatalf("sync put: %v", err)
	}
	defer resp.Body.Close()
	if out, _ := io.ReadAll(resp.Body); resp.StatusCode != http.StatusOK {
		t.Fatalf("sync put %s: status %d: %s", target, resp.StatusCode, out)
	}
}

// syncGet reads the file source of the lease's pod by the native
// workspace sync.
func (s *sandbox) syncGet(t *testing.T, lease, source string) string {
	t.Helper()
	body, err := json.Marshal(map[string]any{"lease": map[string]any{"providerLeaseId": lease},
		"sourcePath": source, "kind": "file", "timeoutMs": 60000})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := s.hc.Post("http://pcsync/v1/sync/get", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatalf("sync get: %v", err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("sync get %s: status %d: %s", source, resp.StatusCode, out)
	}
	return string(out)
}

// execute runs a command on the lease and returns its stdout: the chunk
// lines joined (the result line carries the exit only).
func (s *sandbox) execute(t *testing.T, lease string, env map[string]string, command string, args ...string) string {
	t.Helper()
	code, body := s.post(t, "execute", map[string]any{"lease": map[string]any{"providerLeaseId": lease},
		"command": command, "args": args, "env": env, "timeoutMs": 60000})
	if code != http.StatusOK {
		t.Fatalf("execute: status %d: %s", code, body)
	}
	var stdout strings.Builder
	for _, line := range strings.Split(strings.TrimSpace(string(body)), "\n") {
		var l struct {
			Stdout *string `json:"stdout"`
			Result *struct {
				ExitCode *int `json:"exitCode"`
			} `json:"result"`
			Error map[string]string `json:"error"`
		}
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Fatalf("execute: %v: %s", err, line)
		}
		if l.Error != nil {
			t.Fatalf("execute %s: %v", command, l.Error)
		}
		if l.Stdout != nil {
			stdout.WriteString(*l.Stdout)
		}
		if l.Result != nil {
			if l.Result.ExitCode == nil || *l.Result.ExitCode != 0 {
				t.Fatalf("execute %s: %s", command, line)
			}
			return stdout.String()
		}
	}
	t.Fatalf("execute %s: no result: %s", command, body)
	return ""
}
