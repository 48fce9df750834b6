//go:build integration

package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/pcsync/pcsync/internal/testing/testcluster"
	"github.com/pcsync/pcsync/pkg/config"
	"github.com/pcsync/pcsync/pkg/sandbox/pool"
)

var pcsyncBin string

// ServeAPI serves m's hook API (package hookapi) on socket until ctx
// ends. hookapi imports this package, so a test of package sandbox cannot:
// hookapi_integration_test.go, of package sandbox_test, sets it.
var ServeAPI func(ctx context.Context, m *Manager, socket string) error

func TestMain(m *testing.M) {
	if a := os.Getenv(killChildEnv); a != "" {
		var args killChildArgs
		err := json.Unmarshal([]byte(a), &args)
		if err == nil {
			err = killChild(args)
		}
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	dir, err := os.MkdirTemp("", "pcsync-sandbox-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	pcsyncBin = filepath.Join(dir, "pcsync")
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..")
	cmd := exec.Command("go", "build", "-o", pcsyncBin, "./cmd/pcsync")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build pcsync: %v\n%s", err, out)
		os.Exit(1)
	}
	code := testcluster.Main(m)
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// env is one test's tenant: a namespace under Pod Security "restricted"
// with the tenant service account, a config whose company lives there, kwok
// running pod execs on this host, and a Manager.
type env struct {
	t       testing.TB
	c       *testcluster.Cluster
	ns      string
	dir     string // the config directory
	model   *config.Model
	m       *Manager
	hostDir string
	logs    *strings.Builder
	// logw is the one writer of logs for every Manager of the env (two
	// writers of one builder would race).
	logw *syncWriter
	// resolver is the Manager's Options.Agents.
	resolver AgentResolver
	// proxy is the Manager's Options.ProxyAddresses.
	proxy ProxyAddresses
	// noPools disables the Manager's warm pools.
	noPools bool
	// prestartWait is the Manager's Options.PrestartWait.
	prestartWait time.Duration
	// tune, when set, changes the Manager's options before each start.
	tune func(*Options)
}

type envOptions struct {
	// Quota, when set, is the namespace's ResourceQuota of pods.
	QuotaPods *int
	// AllowList is Settings spec.images.allowList.
	AllowList []string
	// Agents is the company's spec.agents (YAML flow style); default [].
	Agents string
	// Environment, when set, is a sandbox environment the company declares
	// in Git (spec.paperclip, manage: true, Settings spec.paperclip).
	Environment string
	// Resolver is the Manager's Options.Agents.
	Resolver AgentResolver
	// Credentials is the company's spec.credentials (YAML flow style).
	Credentials string
	// ProxyIP, when set, is the address of the tenant's egress proxy
	// Service the Manager is told (Options.ProxyAddresses).
	ProxyIP string
	// Sandbox, when set, is the company's spec.sandbox (YAML flow style).
	Sandbox string
	// NoPools starts the env's Manager with its warm pools disabled.
	NoPools bool
	// PrestartWait is the Manager's Options.PrestartWait; 0: the default.
	PrestartWait time.Duration
}

func newEnv(t testing.TB, o envOptions) *env {
	t.Helper()
	c := testcluster.Get(t)
	ns := c.Namespace(t, "sbx", map[string]string{
		"pod-security.kubernetes.io/enforce": "restricted",
		"pod-security.kubernetes.io/warn":    "restricted",
	})
	i := strings.LastIndexByte(ns, '-')
	prefix, slug := ns[:i+1], ns[i+1:]
	ctx := context.Background()
	// The company label pcsync renders on its tenant namespace (the daemon
	// puts no pod in a namespace without it).
	label := []byte(`{"metadata":{"labels":{"paperclip.io/company":"` + slug + `"}}}`)
	if _, err := c.Client().CoreV1().Namespaces().Patch(ctx, ns, types.MergePatchType, label, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Client().CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{
		ObjectMeta: metav1.ObjectMeta{Name: "paperclip-tenant-sa"}, AutomountServiceAccountToken: ptr.To(false),
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if o.QuotaPods != nil {
		if _, err := c.Client().CoreV1().ResourceQuotas(ns).Create(ctx, &corev1.ResourceQuota{
			ObjectMeta: metav1.ObjectMeta{Name: "paperclip-quota"},
			Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: *resource.NewQuantity(int64(*o.QuotaPods), resource.DecimalSI)}},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	allow := "[]"
	if len(o.AllowList) > 0 {
		allow = `["` + strings.Join(o.AllowList, `","`) + `"]`
	}
	agents := o.Agents
	if agents == "" {
		agents = "[]"
	}
	var settingsPaperclip, companyPaperclip string
	if o.Credentials != "" {
		companyPaperclip = "\n  credentials: " + o.Credentials
	}
	if o.Environment != "" {
		settingsPaperclip = "\n  paperclip: {url: \"http://127.0.0.1:9\", spoolDir: /spool}"
		companyPaperclip += "\n  paperclip: {manage: true, environments: [{name: " + o.Environment + "}]}"
	}
	files := map[string]string{
		"settings.yaml": fmt.Sprintf(`apiVersion: pcsync.io/v1alpha1
kind: Settings
metadata: {name: test}
spec:
  namespacePrefix: %s
  images: {allowList: %s}%s
  defaults:
    resources:
      requests: {cpu: 100m, memory: 128Mi}
      limits: {cpu: 100m, memory: 128Mi}
`, prefix, allow, settingsPaperclip),
		"company.yaml": fmt.Sprintf(`apiVersion: pcsync.io/v1alpha1
kind: Company
metadata: {name: %q}
spec:
  id: company-%s%s
  agents: %s%s
`, slug, slug, companyPaperclip, agents, sandboxSpec(o.Sandbox)),
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	model, err := config.Load(ctx, dir, config.DefaultLoadOptions())
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	hostDir := testcluster.HostDir(t, "sbx-")
	if err := c.ServeExec(ctx, ns, testcluster.ExecOptions{WorkDir: hostDir,
		Env: map[string]string{"PATH": "/usr/local/bin:/usr/bin:/bin", "SANDBOX_TEST": "from-the-pod"}}); err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, c: c, ns: ns, dir: dir, model: model, hostDir: hostDir, logs: &strings.Builder{}, resolver: o.Resolver, noPools: o.NoPools,
		prestartWait: o.PrestartWait}
	if o.ProxyIP != "" {
		e.proxy = proxyIPs{ns: o.ProxyIP}
	}
	e.start()
	return e
}

// sandboxSpec is the company's spec.sandbox line for sandbox; "" for none.
func sandboxSpec(sandbox string) string {
	if sandbox == "" {
		return ""
	}
	return "\n  sandbox: " + sandbox
}

// start (re)starts the manager on the test's state directory.
func (e *env) start() {
	e.t.Helper()
	o := DefaultOptions(filepath.Join(e.hostDir, "state"))
	o.HostRoot, o.ServerPath = e.hostDir, pcsyncBin
	o.ReadyTimeout = time.Minute
	o.Agents = e.resolver
	o.ProxyAddresses = e.proxy
	o.Pool.Disabled = e.noPools
	o.PrestartWait = e.prestartWait
	o.Pool.Lease = testPoolLease("")
	o.Logger = slog.New(slog.NewTextHandler(e.logWriter(), &slog.HandlerOptions{Level: slog.LevelDebug}))
	if e.tune != nil {
		e.tune(&o)
	}
	m, err := New(context.Background(), e.c.RESTConfig(), func() *config.Model { return e.model }, o)
	if err != nil {
		e.t.Fatal(err)
	}
	e.m = m
	e.t.Cleanup(m.Close)
}

// testPoolLease is the tests' pool Lease: in namespace default (every
// cluster has it), with short timings, named identity ("" for a random
// one).
func testPoolLease(identity string) pool.LeaseOptions {
	return pool.LeaseOptions{Namespace: "default", Identity: identity,
		LeaseDuration: 4 * time.Second, RenewDeadline: 3 * time.Second, RetryPeriod: 500 * time.Millisecond}
}

type syncWriter struct {
	mu sync.Mutex
	b  *strings.Builder
}

// logWriter is the env's one writer of logs.
func (e *env) logWriter() *syncWriter {
	if e.logw == nil {
		e.logw = &syncWriter{b: e.logs}
	}
	return e.logw
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (e *env) slug() string { return e.model.Companies[0].Slug() }

func (e *env) acquire(t testing.TB, cfg EnvironmentConfig) LeaseInfo {
	t.Helper()
	if cfg.Company == "" {
		cfg.Company = e.slug()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	info, err := e.m.Acquire(ctx, AcquireParams{Config: cfg, AdapterType: "claude_local", RunID: "run-1"})
	if err != nil {
		t.Fatalf("acquire: %v\nlogs:\n%s", err, e.logs.String())
	}
	return info
}

func (e *env) exec(t testing.TB, id string, p ExecParams) ExecResult {
	t.Helper()
	p.LeaseID = id
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := e.m.Execute(ctx, p, nil)
	if err != nil {
		t.Fatalf("execute %s: %v\nlogs:\n%s", p.Command, err, e.logs.String())
	}
	return res
}

func code(r ExecResult) int {
	if r.ExitCode == nil {
		return -1
	}
	return *r.ExitCode
}

// TestLeaseLifecycle: a lease is one pod that passes Pod Security
// "restricted"; executes run argv, cwd, env and stdin exactly, concurrently,
// over one exec stream; a background process survives its command; release
// answers once the pod is gone and stops what the lease left running.
func TestLeaseLifecycle(t *testing.T) {
	e := newEnv(t, envOptions{})
	info := e.acquire(t, EnvironmentConfig{})
	pod, err := e.c.Client().CoreV1().Pods(e.ns).Get(context.Background(), info.ID, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("lease pod: %v", err)
	}
	if pod.Spec.ActiveDeadlineSeconds == nil || *pod.Spec.ActiveDeadlineSeconds <= 0 {
		t.Errorf("pod has no activeDeadlineSeconds: %v", pod.Spec.ActiveDeadlineSeconds)
	}
	if cwd, _ := info.Metadata["remoteCwd"].(string); !strings.HasPrefix(cwd, e.hostDir) {
		t.Errorf("remoteCwd %q, want under %s", cwd, e.hostDir)
	}

	stdin := "line one\nline two\n"
	res := e.exec(t, info.ID, ExecParams{Command: "sh", Args: []string{"-c", `printf '%s|%s|%s|' "$1" "$SANDBOX_TEST" "$SECRET_ONE"; pwd; cat`, "sh", "a b  c"},
		Env: map[string]string{"SECRET_ONE": "s3cr3t-value", "PAPERCLIP_AGENT_JWT_SECRET": "must-not-pass"}, Stdin: &stdin})
	want := "a b  c|from-the-pod||" + info.Metadata["remoteCwd"].(string) + "\n" + stdin
	if diff := cmp.Diff(want, res.Stdout); diff != "" || code(res) != 0 {
		t.Errorf("stdout (-want +got):\n%s\nexit %d stderr %q", diff, code(res), res.Stderr)
	}
	allowed := e.acquireAllowing(t)
	res = e.exec(t, allowed.ID, ExecParams{Command: "sh", Args: []string{"-c", `echo "$SECRET_ONE:$PAPERCLIP_AGENT_JWT_SECRET"`},
		Env: map[string]string{"SECRET_ONE": "s3cr3t-value", "PAPERCLIP_AGENT_JWT_SECRET": "must-not-pass"}})
	if res.Stdout != "s3cr3t-value:\n" {
		t.Errorf("with envAllow SECRET_ONE: stdout %q, want the allowed key only", res.Stdout)
	}

	res = e.exec(t, info.ID, ExecParams{Command: "sh", Args: []string{"-c", "echo out; echo err >&2; exit 3"}})
	if code(res) != 3 || res.Stdout != "out\n" || res.Stderr != "err\n" {
		t.Errorf("exit %d stdout %q stderr %q, want 3 out err", code(res), res.Stdout, res.Stderr)
	}

	// 20 at once.
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := e.m.Execute(context.Background(), ExecParams{LeaseID: info.ID, Command: "sh",
				Args: []string{"-c", fmt.Sprintf("sleep 0.2; echo %d", i)}}, nil)
			if err == nil && r.Stdout != fmt.Sprintf("%d\n", i) {
				err = fmt.Errorf("execute %d: stdout %q", i, r.Stdout)
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}

	// A background process outlives its command; the bridge's stop loop
	// ends fast (the server reaps the orphan).
	res = e.exec(t, info.ID, ExecParams{Command: "sh", Args: []string{"-c", "nohup sleep 300 >/dev/null 2>&1 & echo $!"}})
	pid := strings.TrimSpace(res.Stdout)
	res = e.exec(t, info.ID, ExecParams{Command: "sh", Args: []string{"-c", "kill -0 " + pid + " && echo alive"}})
	if res.Stdout != "alive\n" {
		t.Fatalf("background sleep %s did not survive its command: %q %q", pid, res.Stdout, res.Stderr)
	}
	res = e.exec(t, info.ID, ExecParams{Command: "sh", Args: []string{"-c",
		"kill " + pid + "; n=0; while kill -0 " + pid + " 2>/dev/null; do n=$((n+1)); [ $n -gt 200 ] && break; sleep 0.01; done; echo $n"}})
	if n := strings.TrimSpace(res.Stdout); n == "" || len(n) > 1 { // at most 9 turns of 10 ms
		t.Errorf("the killed background process lingered %s turns of 10 ms (a zombie nobody reaps?)", n)
	}
	bg := e.exec(t, info.ID, ExecParams{Command: "sh", Args: []string{"-c", "nohup sleep 300 >/dev/null 2>&1 & echo $!"}})
	bgPid := strings.TrimSpace(bg.Stdout)

	// The exec stream breaks mid-command (its relay dies): the client opens
	// a new one and re-attaches, and no output is lost or doubled.
	l := e.m.lookup(info.ID)
	opens := l.client.Stats().Opens
	done := make(chan ExecResult, 1)
	go func() {
		done <- e.exec(t, info.ID, ExecParams{Command: "sh", Args: []string{"-c", "echo before; sleep 1; echo after"}})
	}()
	time.Sleep(300 * time.Millisecond) // the command has printed "before"
	if out, err := exec.Command("pkill", "-f", "sandbox-server attach --socket "+l.Socket).CombinedOutput(); err != nil {
		t.Fatalf("kill the exec's relay: %v %s", err, out)
	}
	if r := <-done; r.Stdout != "before\nafter\n" || code(r) != 0 {
		t.Errorf("across a broken stream: stdout %q exit %d stderr %q, want before, after, 0", r.Stdout, code(r), r.Stderr)
	}
	if got := l.client.Stats().Opens; got != opens+1 {
		t.Errorf("stream opens after one break: %d, want %d", got, opens+1)
	}

	// A timeout kills the whole process group.
	res = e.exec(t, info.ID, ExecParams{Command: "sh", Args: []string{"-c", "sleep 60 & echo $!; wait"}, Timeout: 500 * time.Millisecond})
	if !res.TimedOut {
		t.Errorf("timed-out command: timedOut false (exit %v signal %q)", res.ExitCode, res.Signal)
	}
	if child := strings.TrimSpace(res.Stdout); child != "" && processAlive(child) {
		t.Errorf("the timed-out command's child %s still runs", child)
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	begin := time.Now()
	state, err := e.m.Release(ctx, ReleaseParams{ID: info.ID, Cancel: true})
	if err != nil || state != ReceiptDestroyed {
		t.Fatalf("release: %v %v", state, err)
	}
	t.Logf("release with cancel took %s", time.Since(begin).Round(time.Millisecond))
	if _, err := e.c.Client().CoreV1().Pods(e.ns).Get(ctx, info.ID, metav1.GetOptions{}); err == nil {
		t.Errorf("pod %s still exists after the receipt", info.ID)
	}
	if processAlive(bgPid) {
		t.Errorf("the lease's background process %s outlived the release", bgPid)
	}
	if _, err := e.m.Execute(ctx, ExecParams{LeaseID: info.ID, Command: "true"}, nil); !errors.Is(err, ErrNoLease) {
		t.Errorf("execute after release: %v, want ErrNoLease", err)
	}
	if _, err := e.m.Release(ctx, ReleaseParams{ID: allowed.ID}); err != nil {
		t.Error(err)
	}
	if _, err := e.m.Release(ctx, ReleaseParams{ID: info.ID, Namespace: e.ns}); err != nil {
		t.Errorf("a second release: %v, want a receipt", err)
	}

	// No env value or stdin in the audit log: every exec URL holds only the
	// attach command.
	audit, err := os.ReadFile(e.c.AuditLogPath())
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{"s3cr3t-value", "must-not-pass", "line one"} {
		if strings.Contains(string(audit), secret) {
			t.Errorf("%q is in the API server's audit log", secret)
		}
	}
	// A cold lease's stream is tried from its pod's create on: the tries
	// the API server refuses (the pod not running yet: more of them on a
	// loaded machine) are no streams.
	execs, err := e.c.AuditEvents(func(ev testcluster.AuditEvent) bool {
		return ev.ObjectRef != nil && ev.ObjectRef.Namespace == e.ns && ev.ObjectRef.Subresource == "exec" &&
			(ev.ResponseStatus == nil || ev.ResponseStatus.Code < 400)
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(execs) == 0 || len(execs) > 4 {
		t.Errorf("%d pod execs in the audit log for 2 leases and 30 executes, want one stream per lease", len(execs))
	}
	if strings.Contains(e.logs.String(), "s3cr3t-value") {
		t.Errorf("an env value is in the manager's log")
	}
}

func (e *env) acquireAllowing(t testing.TB) LeaseInfo {
	return e.acquire(t, EnvironmentConfig{EnvAllow: []string{"SECRET_ONE"}})
}

// processAlive reports whether pid runs 2 s from now at the latest: a
// process the group kill reached may take a moment to die under load, and a
// zombie no longer runs.
func processAlive(pid string) bool {
	deadline := time.Now().Add(2 * time.Second)
	for {
		stat, err := os.ReadFile("/proc/" + pid + "/stat")
		if err != nil {
			return false
		}
		// The state follows the command's closing parenthesis.
		if i := strings.LastIndexByte(string(stat), ')'); i > 0 && i+2 < len(stat) && stat[i+2] == 'Z' {
			return false
		}
		if time.Now().After(deadline) {
			return true
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestAcquireRefusals: a namespace that is not the company's, a bad config,
// an unknown company, an image that is not allowed, a full quota and a
// suspended company are
// refused at once, each with a message that
// says what to fix, and leave no pod and no journal entry.
func TestAcquireRefusals(t *testing.T) {
	one := 0
	e := newEnv(t, envOptions{QuotaPods: &one})
	// The namespace exists but is not the company's (pcsync apply left it
	// alone): no pod goes there.
	unlabel := []byte(`{"metadata":{"labels":{"paperclip.io/company":null}}}`)
	if _, err := e.c.Client().CoreV1().Namespaces().Patch(context.Background(), e.ns, types.MergePatchType, unlabel, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err := e.m.Acquire(context.Background(), AcquireParams{Config: EnvironmentConfig{Company: e.slug()}, AdapterType: "claude_local"})
	var ue *UserError
	if !errors.As(err, &ue) || ue.Code != "namespace_not_tenant" ||
		!strings.Contains(ue.Message, "no pod created: Namespace/"+e.ns+" exists but is not company "+e.slug()+"'s tenant namespace") {
		t.Errorf("acquire in a namespace that is not the company's: %v", err)
	}
	relabel := []byte(`{"metadata":{"labels":{"paperclip.io/company":"` + e.slug() + `"}}}`)
	if _, err := e.c.Client().CoreV1().Namespaces().Patch(context.Background(), e.ns, types.MergePatchType, relabel, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		cfg  EnvironmentConfig
		code Code
		want string
	}{
		{"unknown company", EnvironmentConfig{Company: "nope"}, "config_invalid", `config.company: no Company "nope" in the pcsync config`},
		{"image not allowed", EnvironmentConfig{Image: "evil.example/miner:1"}, "image_not_allowed", `image "evil.example/miner:1" is not allowed`},
		{"quota full", EnvironmentConfig{}, "quota_full", "is at its quota (ResourceQuota paperclip-quota in namespace " + e.ns},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := tt.cfg
			if cfg.Company == "" {
				cfg.Company = e.slug()
			}
			begin := time.Now()
			_, err := e.m.Acquire(context.Background(), AcquireParams{Config: cfg, AdapterType: "claude_local"})
			var ue *UserError
			if !errors.As(err, &ue) || ue.Code != tt.code || !strings.Contains(ue.Message, tt.want) {
				t.Fatalf("acquire: %v, want %s: …%s…", err, tt.code, tt.want)
			}
			t.Logf("refused in %s: %s", time.Since(begin).Round(time.Millisecond), ue.Message)
		})
	}
	// A suspended company (spec.suspend) starts no lease.
	suspended := *e.model
	suspended.Companies = slices.Clone(e.model.Companies)
	suspended.Companies[0].Spec.Suspend = true
	e.model = &suspended
	_, err = e.m.Acquire(context.Background(), AcquireParams{Config: EnvironmentConfig{Company: e.slug()}, AdapterType: "claude_local"})
	if !errors.As(err, &ue) || ue.Code != CodeCompanySuspended || !strings.Contains(ue.Message, `Company "`+e.slug()+`" is suspended`) {
		t.Errorf("acquire for a suspended company: %v, want %s naming it", err, CodeCompanySuspended)
	}
	pods, err := e.c.Client().CoreV1().Pods(e.ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != 0 || len(e.m.j.leases()) != 0 {
		t.Errorf("after refusals: %d pods, %d journal entries; want none", len(pods.Items), len(e.m.j.leases()))
	}
}

// TestRestartAdoptsAndReaps: a manager that starts on a journal adopts the
// live lease (its executes work again) and deletes the pod of an expired one.
func TestRestartAdoptsAndReaps(t *testing.T) {
	e := newEnv(t, envOptions{})
	live := e.acquire(t, EnvironmentConfig{})
	short := e.acquire(t, EnvironmentConfig{LeaseTTLSec: 3})
	res := e.exec(t, live.ID, ExecParams{Command: "sh", Args: []string{"-c", "echo before"}})
	if res.Stdout != "before\n" {
		t.Fatalf("stdout %q", res.Stdout)
	}
	// A crash: the old manager's streams end, its journal stays.
	e.m.Close()
	time.Sleep(3 * time.Second) // let the short lease expire while no daemon runs
	e.start()
	res = e.exec(t, live.ID, ExecParams{Command: "sh", Args: []string{"-c", "echo after"}})
	if res.Stdout != "after\n" {
		t.Errorf("adopted lease: stdout %q stderr %q", res.Stdout, res.Stderr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for {
		_, err := e.c.Client().CoreV1().Pods(e.ns).Get(ctx, short.ID, metav1.GetOptions{})
		if err != nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the expired lease's pod %s is still there", short.ID)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, err := e.m.Release(ctx, ReleaseParams{ID: live.ID}); err != nil {
		t.Fatal(err)
	}
}
