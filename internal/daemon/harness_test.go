//go:build integration

package daemon

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pcsync/pcsync/internal/lib/leader"
	"github.com/pcsync/pcsync/internal/testing/testcluster"
	"github.com/pcsync/pcsync/pkg/apply"
	"github.com/pcsync/pcsync/pkg/config"
	"github.com/pcsync/pcsync/pkg/reconcile"
	"github.com/pcsync/pcsync/pkg/result"
	"github.com/pcsync/pcsync/pkg/runs"
	"github.com/pcsync/pcsync/pkg/runs/spool"
)

// Every test binary of this package runs one real control plane.
func TestMain(m *testing.M) { os.Exit(testcluster.Main(m)) }

// waitDeadline bounds every wait. It is generous: nothing asserts on
// timing; a wait that runs out means the daemon never got there.
const waitDeadline = 2 * time.Minute

// env is one test's world: a config directory, a namespace for the ApplySet
// parent and the Lease, and a namespace prefix of its own so that tenants of
// different tests never meet.
type env struct {
	t      *testing.T
	c      *testcluster.Cluster
	ns     string
	prefix string
	root   string
	dir    string // the config directory the daemon is given
}

func newEnv(t *testing.T) *env {
	t.Helper()
	c := testcluster.Get(t)
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	e := &env{t: t, c: c, ns: c.Namespace(t, "daemon", nil), prefix: "t" + hex.EncodeToString(b) + "-", root: t.TempDir()}
	e.dir = filepath.Join(e.root, "config")
	t.Cleanup(e.deleteTenants)
	return e
}

// company is a Company document; extra is appended to its spec.
func company(slug, extra string) string {
	return fmt.Sprintf(`apiVersion: pcsync.io/v1alpha1
kind: Company
metadata: {name: %q}
spec:
  id: id-%s
  agents:
    - {name: coder, adapter: claude_local}
%s`, slug, slug, extra)
}

// files writes a config directory: Settings with the test's prefix plus the
// given files (name → content).
func (e *env) files(dir string, files map[string]string) {
	e.t.Helper()
	all := map[string]string{"settings.yaml": fmt.Sprintf(
		"apiVersion: pcsync.io/v1alpha1\nkind: Settings\nmetadata: {name: test}\nspec:\n  namespacePrefix: %s\n", e.prefix)}
	for k, v := range files {
		all[k] = v
	}
	for name, content := range all {
		writeAtomic(e.t, filepath.Join(dir, name), content)
	}
}

// writeAtomic writes a file the way editors and git do: a temp file renamed
// over the old one.
func writeAtomic(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp")
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func (e *env) namespace(slug string) string { return e.prefix + slug }

// userAgent is the user agent of a daemon's apply requests, unique to the
// test (the audit log is shared by every test of the binary).
func (e *env) userAgent(daemon string) string { return "pcsync-test-" + e.prefix + daemon }

// deleteTenants removes the tenant namespaces the test created.
func (e *env) deleteTenants() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	list, err := e.c.Client().CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		e.t.Errorf("list namespaces: %v", err)
		return
	}
	for _, ns := range list.Items {
		if strings.HasPrefix(ns.Name, e.prefix) {
			_ = e.c.Client().CoreV1().Namespaces().Delete(ctx, ns.Name, metav1.DeleteOptions{})
		}
	}
}

// waitFor polls cond until it holds; it returns when it first held.
func (e *env) waitFor(what string, cond func(ctx context.Context) bool) time.Time {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitDeadline)
	defer cancel()
	for {
		if cond(ctx) {
			return time.Now()
		}
		select {
		case <-ctx.Done():
			e.t.Fatalf("gave up waiting for %s", what)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// nsExists reports whether a tenant namespace exists (and is not being
// deleted).
func (e *env) nsExists(ctx context.Context, slug string) bool {
	ns, err := e.c.Client().CoreV1().Namespaces().Get(ctx, e.namespace(slug), metav1.GetOptions{})
	return err == nil && ns.DeletionTimestamp == nil
}

func (e *env) nsGoneOrDeleting(ctx context.Context, slug string) bool {
	ns, err := e.c.Client().CoreV1().Namespaces().Get(ctx, e.namespace(slug), metav1.GetOptions{})
	return apierrors.IsNotFound(err) || (err == nil && ns.DeletionTimestamp != nil)
}

// quotaPods returns the pods limit of a tenant's ResourceQuota, "" if none.
func (e *env) quotaPods(ctx context.Context, slug string) string {
	q, err := e.c.Client().CoreV1().ResourceQuotas(e.namespace(slug)).Get(ctx, "paperclip-quota", metav1.GetOptions{})
	if err != nil {
		return ""
	}
	v := q.Spec.Hard["pods"]
	return v.String()
}

// daemonRun is one daemon running in the background.
type daemonRun struct {
	name     string
	cancel   context.CancelFunc
	done     chan error
	once     sync.Once
	err      error
	addr     string
	mu       sync.Mutex
	outcomes []reconcile.Outcome
	exec     *fakeExecutor
}

// daemonConfig says how to start a daemon.
type daemonConfig struct {
	name     string // user agent suffix and lease identity
	interval time.Duration
	prune    bool
	leader   bool
	runs     bool
	spool    string
	// sandbox, when set, is the daemon's Options.Sandbox.
	sandbox func(ctx context.Context, model func() *config.Model, changed <-chan struct{}) error
	// shard is the shard served; its ApplySet is shard.Name("pcsync"), and
	// it takes companies over from the other shards' sets named so.
	shard config.Shard
	// exec, when set, is the runs loop's executor instead of a fakeExecutor.
	exec runs.Executor
}

// start runs a daemon on e.dir against the test cluster, serving its
// endpoints on a free port.
func (e *env) start(dc daemonConfig) *daemonRun {
	e.t.Helper()
	if dc.name == "" {
		dc.name = "a"
	}
	logger := slog.New(slog.DiscardHandler)
	if testing.Verbose() {
		logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})).With("daemon", dc.name)
	}
	cfg := e.c.RESTConfig()
	cfg.UserAgent = e.userAgent(dc.name)
	mo := apply.DefaultManagerOptions()
	mo.ApplySet = apply.ParentRef{Name: dc.shard.Name("pcsync"), Namespace: e.ns}
	mo.Logger = logger
	m, err := apply.NewManager(cfg, mo)
	if err != nil {
		e.t.Fatal(err)
	}
	r := &daemonRun{name: dc.name, done: make(chan error, 1)}
	o := DefaultOptions(e.dir)
	o.Logger, o.Applier, o.MetricsAddress = logger, m, "127.0.0.1:0"
	o.Reconcile.Debounce = 100 * time.Millisecond
	if dc.interval > 0 {
		o.Reconcile.Interval = dc.interval
	}
	o.Reconcile.RetryMin = 500 * time.Millisecond
	o.Reconcile.Apply.Prune = dc.prune
	o.Shard = dc.shard
	o.Reconcile.ShardSet = func(s config.Shard) string { return apply.ParentID(s.Name("pcsync"), e.ns) }
	o.Reconcile.ApprovalPoll = 500 * time.Millisecond
	o.Reconcile.Observe = func(out reconcile.Outcome) {
		r.mu.Lock()
		r.outcomes = append(r.outcomes, out)
		r.mu.Unlock()
	}
	listening := make(chan string, 1)
	o.OnListen = func(a net.Addr) { listening <- a.String() }
	if dc.runs {
		ro := spool.DefaultOptions(dc.spool)
		ro.RescanInterval = 500 * time.Millisecond
		ro.Logger = nil // the daemon's
		o.Runs = &ro
		r.exec = &fakeExecutor{daemon: dc.name}
		var exec runs.Executor = r.exec
		if dc.exec != nil {
			exec = dc.exec
		}
		o.NewExecutor = func(context.Context) (runs.Executor, error) { return exec, nil }
	}
	o.Sandbox = dc.sandbox
	if dc.leader {
		lo := leader.DefaultOptions()
		lo.Namespace, lo.Name, lo.Identity = e.ns, "pcsync", dc.name
		lo.LeaseDuration, lo.RenewDeadline, lo.RetryPeriod = 4*time.Second, 3*time.Second, 250*time.Millisecond
		o.LeaderElection = &lo
		o.LeaseClient = e.c.Client()
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() { r.done <- Run(ctx, o) }()
	select {
	case r.addr = <-listening:
	case err := <-r.done:
		e.t.Fatalf("daemon %s: %v", dc.name, err)
	case <-time.After(waitDeadline):
		e.t.Fatalf("daemon %s does not listen", dc.name)
	}
	e.t.Cleanup(func() {
		r.cancel()
		if err := r.wait(); err != nil {
			e.t.Errorf("daemon %s: %v", dc.name, err)
		}
	})
	return r
}

// stop stops the daemon gracefully and returns Run's result.
func (r *daemonRun) stop() error {
	r.cancel()
	return r.wait()
}

func (r *daemonRun) wait() error {
	r.once.Do(func() { r.err = <-r.done })
	return r.err
}

// reconciles returns the outcomes so far.
func (r *daemonRun) reconciles() []reconcile.Outcome {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]reconcile.Outcome(nil), r.outcomes...)
}

// get fetches one of the daemon's endpoints.
func (r *daemonRun) get(t *testing.T, path string) (int, string) {
	t.Helper()
	resp, err := http.Get("http://" + r.addr + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// fakeExecutor "runs" an agent by succeeding at once, recording which
// daemon started which run.
type fakeExecutor struct {
	daemon  string
	mu      sync.Mutex
	started []string
}

func (f *fakeExecutor) Name() string { return "fake" }

func (f *fakeExecutor) Start(_ context.Context, r *runs.Run) (runs.Handle, error) {
	f.mu.Lock()
	f.started = append(f.started, r.RunID)
	f.mu.Unlock()
	res := result.New(r.RunID, r.Company.Slug(), r.Agent.Name, string(r.Agent.Adapter))
	res.Status = result.StatusSucceeded
	res.ExitCode = result.Ptr(0)
	res.Usage = &result.Usage{InputTokens: 10, OutputTokens: 5}
	res.CostUSD = result.Ptr(0.5)
	now := time.Now()
	res.SetTimes(now, now.Add(2*time.Second))
	return fakeHandle{ending: runs.Ending{Result: res}}, nil
}

func (f *fakeExecutor) Adopt(context.Context, *runs.Run) (runs.Handle, error) {
	return nil, runs.ErrNotStarted
}

func (f *fakeExecutor) runs() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.started...)
}

type fakeHandle struct{ ending runs.Ending }

func (h fakeHandle) Wait(context.Context) (runs.Ending, error) { return h.ending, nil }
func (h fakeHandle) Cancel()                                   {}
func (h fakeHandle) Release(context.Context) error             { return nil }

// httpGet returns the body of a GET, for polling.
func httpGet(url string) (string, error) {
	resp, err := http.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}
