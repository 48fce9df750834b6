//go:build integration

package kubeexec

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/yaml"

	"github.com/pcsync/pcsync/internal/lib/kube"
	"github.com/pcsync/pcsync/internal/testing/testcluster"
	"github.com/pcsync/pcsync/pkg/config"
	"github.com/pcsync/pcsync/pkg/render"
	"github.com/pcsync/pcsync/pkg/result"
	"github.com/pcsync/pcsync/pkg/runs/spool"
)

// TestMain runs the package's tests against one real control plane with
// kwok as its node.
func TestMain(m *testing.M) { os.Exit(testcluster.Main(m)) }

// testAPIKey is the daemon's ANTHROPIC_API_KEY in the integration tests; it
// must reach the run's Secret and nothing else.
const testAPIKey = "sk-ant-integration-7f3a9c1e5b"

// envOptions shape one integration test's company.
type envOptions struct {
	// Cluster is the control plane to use; nil means the package's shared
	// one.
	Cluster *testcluster.Cluster
	// Labels are the agent's pod labels: the kwok outcome.
	Labels map[string]string
	// Concurrency is the agent's concurrency (default 1).
	Concurrency int
	// Company is merged into the company's spec (quota, limitRange, jobs…).
	Company map[string]any
	// Agent is merged into the agent (resources, timeoutSec…).
	Agent map[string]any
	// LogLines, when set, are served as the container log of every pod of
	// the namespace.
	LogLines []string
}

// env is one integration test's world: a tenant namespace with the real
// tenant manifests applied (Pod Security restricted), a config directory, a
// spool directory and a state directory.
type env struct {
	t      testing.TB
	c      *testcluster.Cluster
	cs     kubernetes.Interface
	ns     string
	slug   string
	cfgDir string
	spool  string
	state  string
	model  *config.Model
	logs   *testcluster.LogSource
	// impersonate, when set, is the user the in-process daemon's client
	// acts as (so that API Priority and Fairness classifies it apart).
	impersonate string
}

// agentName is the agent of every test company.
const agentName = "coder"

func newEnv(t testing.TB, o envOptions) *env {
	t.Helper()
	c := o.Cluster
	if c == nil {
		c = testcluster.Get(t)
	}
	// The namespace is created (and deleted after the test) by the test
	// cluster; the company's slug is its random suffix, so that the
	// rendered tenant namespace is this one.
	ns := c.Namespace(t, "kx", nil)
	i := strings.LastIndexByte(ns, '-')
	prefix, slug := ns[:i+1], ns[i+1:]
	e := &env{t: t, c: c, cs: c.Client(), ns: ns, slug: slug,
		cfgDir: t.TempDir(), spool: t.TempDir(), state: t.TempDir()}

	agent := map[string]any{
		"name":        agentName,
		"adapter":     "claude_local",
		"model":       "claude-sonnet-4-6",
		"concurrency": max(1, o.Concurrency),
		"labels":      o.Labels,
	}
	maps.Copy(agent, o.Agent)
	// Egress mode standard unless the test says: these tests count and
	// read the namespace's pods, and the default mode's egress proxy would
	// add one (proxy_integration_test.go sets mode proxy).
	spec := map[string]any{"id": "company-" + slug, "agents": []any{agent}, "egress": map[string]any{"mode": "standard"}}
	maps.Copy(spec, o.Company)
	docs := []map[string]any{
		{"apiVersion": config.APIVersion, "kind": "Settings", "metadata": map[string]any{"name": "fleet"},
			"spec": map[string]any{"namespacePrefix": prefix, "images": map[string]any{"allowList": []any{"ghcr.io/paperclipai/*"}}}},
		{"apiVersion": config.APIVersion, "kind": "Company", "metadata": map[string]any{"name": slug}, "spec": spec},
	}
	for i, d := range docs {
		data, err := yaml.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(e.cfgDir, fmt.Sprintf("%d.yaml", i)), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	m, err := config.Load(ctx, e.cfgDir, config.LoadOptions{})
	if err != nil {
		var errs *config.Errors
		if errors.As(err, &errs) {
			t.Fatalf("config:\n%s", strings.Join(errs.Lines(), "\n"))
		}
		t.Fatal(err)
	}
	e.model = m
	e.applyTenant(ctx)
	if o.LogLines != nil {
		if e.logs, err = c.ServeLogs(ctx, ns, nil, o.LogLines); err != nil {
			t.Fatal(err)
		}
	}
	return e
}

// applyTenant renders the company's tenant manifests with pkg/render and
// applies them server-side: the Namespace labels for Pod Security
// restricted, the ServiceAccount, quota, limit range and network policies.
func (e *env) applyTenant(ctx context.Context) {
	e.t.Helper()
	out, err := render.Render(e.model, render.Options{})
	if err != nil {
		e.t.Fatalf("render: %v", err)
	}
	cfg := e.c.RESTConfig()
	dc := kubernetes.NewForConfigOrDie(cfg).Discovery()
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	for _, obj := range out.Objects {
		gvk := obj.GroupVersionKind()
		mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			e.t.Fatalf("%s: %v", gvk, err)
		}
		ri := e.c.Dynamic().Resource(mapping.Resource)
		var rerr error
		if ns := obj.GetNamespace(); ns != "" {
			_, rerr = ri.Namespace(ns).Apply(ctx, obj.GetName(), obj, metav1.ApplyOptions{FieldManager: "pcsync-test", Force: true})
		} else {
			_, rerr = ri.Apply(ctx, obj.GetName(), obj, metav1.ApplyOptions{FieldManager: "pcsync-test", Force: true})
		}
		if rerr != nil {
			e.t.Fatalf("apply %s %s/%s: %v", gvk.Kind, obj.GetNamespace(), obj.GetName(), rerr)
		}
	}
	// Pods are refused until the tenant ServiceAccount exists; it does now.
}

// drop writes a run request into the spool the way writers must: a hidden
// temp file renamed in.
func (e *env) drop(name string, req map[string]any) {
	e.t.Helper()
	r := map[string]any{"apiVersion": config.APIVersion, "kind": "Run", "company": e.slug, "agent": agentName,
		"prompt": "Summarise the repository's README in one sentence."}
	maps.Copy(r, req)
	maps.DeleteFunc(r, func(_ string, v any) bool { return v == nil }) // a nil value removes a field
	data, err := json.Marshal(r)
	if err != nil {
		e.t.Fatal(err)
	}
	tmp := filepath.Join(e.spool, "."+name+".tmp")
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		e.t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(e.spool, name+".json")); err != nil {
		e.t.Fatal(err)
	}
}

// daemonRun is a running daemon with the Kubernetes executor.
type daemonRun struct {
	exec    *Executor
	cancel  context.CancelFunc
	done    chan error
	mu      sync.Mutex
	events  []spool.Event
	eventAt []time.Time
	seen    chan struct{}
	// finished receives the name of every run whose result is written.
	finished chan string
}

// startDaemon runs `pcsync daemon --executor kubernetes` in process, as the
// CLI wires it. With once it returns when every request present has its
// result.
func (e *env) startDaemon(once bool, tweak func(*Options)) *daemonRun {
	e.t.Helper()
	return e.startDaemonWith(once, nil, tweak)
}

// startDaemonWith is startDaemon with the executor's REST config counted
// by counter (when set) and the daemon's Observe chained to observe.
func (e *env) startDaemonWith(once bool, counter *kube.RequestCounter, tweak func(*Options)) *daemonRun {
	e.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cfg := e.c.RESTConfig()
	cfg.Impersonate.UserName = e.impersonate
	kube.DefaultFlags().ConfigureRateLimits(cfg)
	if counter != nil {
		counter.Instrument(cfg)
	}
	opts := Options{
		StateDir:           e.state,
		Environ:            func() []string { return []string{"ANTHROPIC_API_KEY=" + testAPIKey, "PATH=/usr/bin"} },
		Logger:             testLogger(e.t),
		LogReconnectDelay:  200 * time.Millisecond,
		UnschedulableGrace: time.Second,
		QuotaGrace:         time.Second,
	}
	if tweak != nil {
		tweak(&opts)
	}
	ex, err := New(ctx, cfg, opts)
	if err != nil {
		cancel()
		e.t.Fatal(err)
	}
	d := &daemonRun{exec: ex, cancel: cancel, done: make(chan error, 1), seen: make(chan struct{}, 1), finished: make(chan string, 4096)}
	do := spool.DefaultOptions(e.spool)
	do.StateDir, do.Once, do.Logger = e.state, once, opts.Logger
	do.RescanInterval = 500 * time.Millisecond
	do.Observe = func(ev spool.Event) {
		if ev.Kind == spool.EventFinished {
			select {
			case d.finished <- ev.Name:
			default:
			}
		}
		d.mu.Lock()
		d.events = append(d.events, ev)
		d.eventAt = append(d.eventAt, time.Now())
		d.mu.Unlock()
		select {
		case d.seen <- struct{}{}:
		default:
		}
	}
	dm, err := spool.New(e.model, ex, do)
	if err != nil {
		cancel()
		e.t.Fatal(err)
	}
	go func() { d.done <- dm.Run(ctx) }()
	e.t.Cleanup(func() { d.stop(e.t) })
	return d
}

// stop ends the daemon as SIGTERM does: its runs go on.
func (d *daemonRun) stop(t testing.TB) {
	d.cancel()
	select {
	case err := <-d.done:
		if err != nil {
			t.Errorf("daemon: %v", err)
		}
		d.done <- nil
	case <-time.After(time.Minute):
		t.Errorf("the daemon did not stop within a minute")
	}
}

// wait waits (generously) for a once-daemon to return.
func (d *daemonRun) wait(t testing.TB) {
	t.Helper()
	select {
	case err := <-d.done:
		if err != nil {
			t.Fatalf("daemon: %v", err)
		}
		d.done <- nil
	case <-time.After(3 * time.Minute):
		t.Fatalf("the daemon did not finish within 3 minutes")
	}
}

// waitEvent waits until the daemon reported an event of that kind for name.
func (d *daemonRun) waitEvent(t testing.TB, kind spool.EventKind, name string) {
	t.Helper()
	deadline := time.After(2 * time.Minute)
	for {
		d.mu.Lock()
		for _, ev := range d.events {
			if ev.Kind == kind && ev.Name == name {
				d.mu.Unlock()
				return
			}
		}
		d.mu.Unlock()
		select {
		case <-d.seen:
		case <-deadline:
			t.Fatalf("no %s event for %s within 2 minutes", kind, name)
		}
	}
}

// result reads a run's result file.
func (e *env) result(name string) result.RunResult {
	e.t.Helper()
	r, err := result.Read(filepath.Join(e.spool, name+result.Suffix))
	if err != nil {
		e.t.Fatal(err)
	}
	return r
}

// logFile reads a run's <name>.log.
func (e *env) logFile(name string) string {
	e.t.Helper()
	data, err := os.ReadFile(filepath.Join(e.spool, name+".log"))
	if err != nil {
		e.t.Fatal(err)
	}
	return string(data)
}

// waitUntil polls cond (a test-side check of cluster or file state) with a
// generous deadline.
func (e *env) waitUntil(what string, cond func() bool) {
	e.t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			e.t.Fatalf("gave up waiting (2 minutes) for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// jobGone reports whether the Job is deleted or being deleted.
func (e *env) jobGone(name string) bool {
	j, err := e.cs.BatchV1().Jobs(e.ns).Get(context.Background(), name, metav1.GetOptions{})
	return apierrors.IsNotFound(err) || err == nil && j.DeletionTimestamp != nil
}

// jobName is the Job of a run id in this env.
func (e *env) jobName(runID string) string { return JobName(e.slug, agentName, runID) }

// auditCount counts completed API requests of a verb on a resource in the
// env's namespace (name "" for any).
func (e *env) auditCount(verb, resource, name string) int {
	e.t.Helper()
	evs, err := e.c.AuditEvents(func(a testcluster.AuditEvent) bool {
		return a.Verb == verb && a.ObjectRef != nil && a.ObjectRef.Resource == resource &&
			a.ObjectRef.Subresource == "" && a.ObjectRef.Namespace == e.ns && (name == "" || a.ObjectRef.Name == name)
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return len(evs)
}

// transcript returns the lines of a testdata transcript.
func transcript(t testing.TB, file string) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
}

// testLogger writes the executor's and daemon's logs to the test log, and
// to nowhere once the test has ended.
func testLogger(t testing.TB) *slog.Logger {
	w := &testWriter{t: t}
	t.Cleanup(func() {
		w.mu.Lock()
		w.closed = true
		w.mu.Unlock()
	})
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct {
	mu     sync.Mutex
	t      testing.TB
	closed bool
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.closed {
		w.t.Log(string(bytes.TrimRight(p, "\n")))
	}
	return len(p), nil
}

var _ io.Writer = (*testWriter)(nil)

// eventTime returns when the daemon reported an event of that kind for
// name (zero when it did not).
func (d *daemonRun) eventTime(kind spool.EventKind, name string) time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	for i, ev := range d.events {
		if ev.Kind == kind && ev.Name == name {
			return d.eventAt[i]
		}
	}
	return time.Time{}
}
