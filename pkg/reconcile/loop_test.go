package reconcile

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/pcsync/pcsync/pkg/apply"
	"github.com/pcsync/pcsync/pkg/config"
	"github.com/pcsync/pcsync/pkg/health"
	"github.com/pcsync/pcsync/pkg/metrics"
)

// fakeApplier records what it is asked to apply and answers with a chosen
// action for every object.
type fakeApplier struct {
	mu     sync.Mutex
	calls  [][]string // names of the Namespaces of each call
	action apply.Action
}

func (f *fakeApplier) Apply(_ context.Context, objs []*unstructured.Unstructured, _ apply.ApplyOptions) (*apply.ChangeSet, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var ns []string
	r := &apply.ChangeSet{}
	for _, o := range objs {
		if o.GetKind() == "Namespace" {
			ns = append(ns, o.GetName())
		}
		act := f.action
		if act == apply.ActionConfigured && o.GetKind() != "ResourceQuota" {
			act = apply.ActionUnchanged // drift in one object per tenant
		}
		r.Objects = append(r.Objects, apply.Change{Ref: apply.RefOf(o), Action: act})
		if act != apply.ActionUnchanged {
			r.MutatingRequests++
		}
	}
	f.calls = append(f.calls, ns)
	return r, nil
}

func (f *fakeApplier) set(a apply.Action) {
	f.mu.Lock()
	f.action = a
	f.mu.Unlock()
}

func company(slug string) string {
	return fmt.Sprintf("apiVersion: pcsync.io/v1alpha1\nkind: Company\nmetadata: {name: %q}\nspec:\n  id: id-%s\n  agents: [{name: coder, adapter: claude_local}]\n", slug, slug)
}

// loopHarness runs a Loop on a temp config directory with a fake applier
// and records its outcomes.
type loopHarness struct {
	t        *testing.T
	dir      string
	applier  *fakeApplier
	loop     *Loop
	metrics  *metrics.Metrics
	health   *health.Checker
	outcomes chan Outcome
	models   chan *config.Model
}

func startLoop(t *testing.T, applier *fakeApplier) *loopHarness {
	t.Helper()
	h := &loopHarness{t: t, dir: t.TempDir(), applier: applier, metrics: metrics.New(), health: health.NewChecker(),
		outcomes: make(chan Outcome, 100), models: make(chan *config.Model, 100)}
	write(t, filepath.Join(h.dir, "acme.yaml"), company("acme"))
	o := DefaultOptions(h.dir)
	o.Interval = time.Hour // the test triggers reconciles itself
	o.Debounce = 50 * time.Millisecond
	o.Logger = slog.New(slog.DiscardHandler)
	o.Metrics, o.Health = h.metrics, h.health
	o.Observe = func(out Outcome) { h.outcomes <- out }
	o.OnModel = func(m *config.Model) { h.models <- m }
	var a Applier
	if applier != nil {
		a = applier
	}
	l, err := New(a, o)
	if err != nil {
		t.Fatal(err)
	}
	h.loop = l
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return h
}

func (h *loopHarness) next() Outcome {
	h.t.Helper()
	select {
	case out := <-h.outcomes:
		return out
	case <-time.After(waitDeadline):
		h.t.Fatal("no reconcile")
		return Outcome{}
	}
}

// summary is the part of an outcome the tests compare.
type summary struct {
	Trigger       Trigger
	FailedStage   Stage
	ConfigErrors  []string
	ConfigChanged bool
	Drift         int
	Companies     int
}

func summarize(out Outcome) summary {
	s := summary{Trigger: out.Trigger, FailedStage: out.FailedStage, ConfigErrors: out.ConfigErrors,
		ConfigChanged: out.ConfigChanged, Drift: out.Drift}
	if out.Model != nil {
		s.Companies = len(out.Model.Companies)
	}
	return s
}

func TestLoopInvalidConfigKeepsLastGoodState(t *testing.T) {
	fa := &fakeApplier{action: apply.ActionCreated}
	h := startLoop(t, fa)

	if diff := cmp.Diff(summary{Trigger: TriggerStart, ConfigChanged: true, Companies: 1}, summarize(h.next())); diff != "" {
		t.Fatalf("first reconcile (-want +got):\n%s", diff)
	}
	<-h.loop.Ready()
	good := h.loop.Model()

	// An invalid edit: reported, nothing applied, the model kept.
	write(t, filepath.Join(h.dir, "globex.yaml"), "apiVersion: pcsync.io/v1alpha1\nkind: Company\nmetadata: {name: globex}\nspec: {}\n")
	out := h.next()
	want := summary{Trigger: TriggerChange, FailedStage: StageLoad,
		ConfigErrors: []string{filepath.Join(h.dir, "globex.yaml") + ":4:1: spec.id: field is required"}}
	if diff := cmp.Diff(want, summarize(out)); diff != "" {
		t.Errorf("invalid edit (-want +got):\n%s", diff)
	}
	if h.loop.Model() != good {
		t.Error("the model changed on an invalid config")
	}
	if got := len(fa.calls); got != 1 {
		t.Errorf("applier called %d times, want 1 (not for the invalid config)", got)
	}
	if got := testutil.ToFloat64(h.metrics.ConfigValid); got != 0 {
		t.Errorf("pcsync_config_valid = %v, want 0", got)
	}
	if got := testutil.ToFloat64(h.metrics.ReconcileErrors.WithLabelValues("load")); got != 1 {
		t.Errorf(`pcsync_reconcile_errors_total{stage="load"} = %v, want 1`, got)
	}
	if r := h.health.Report(); r.Status != health.StateDegraded {
		t.Errorf("health %s, want degraded: %+v", r.Status, r.Conditions)
	}

	// Fixed: applied, both companies.
	write(t, filepath.Join(h.dir, "globex.yaml"), company("globex"))
	if diff := cmp.Diff(summary{Trigger: TriggerChange, ConfigChanged: true, Companies: 2}, summarize(h.next())); diff != "" {
		t.Errorf("fixed config (-want +got):\n%s", diff)
	}
	// The change applies what changed: globex's tenant.
	if diff := cmp.Diff([][]string{{"paperclip-acme"}, {"paperclip-globex"}}, fa.calls); diff != "" {
		t.Errorf("applied namespaces (-want +got):\n%s", diff)
	}
	if got := testutil.ToFloat64(h.metrics.ConfigValid); got != 1 {
		t.Errorf("pcsync_config_valid = %v, want 1", got)
	}
	if r := h.health.Report(); r.Status != health.StateReady {
		t.Errorf("health %s, want ready: %+v", r.Status, r.Conditions)
	}
	// Every valid config went to OnModel; the invalid one did not.
	if n := len(h.models); n != 2 {
		t.Errorf("OnModel called %d times, want 2", n)
	}
}

func TestLoopCountsDriftOnlyWhenTheConfigDidNotChange(t *testing.T) {
	fa := &fakeApplier{action: apply.ActionCreated}
	h := startLoop(t, fa)
	if out := h.next(); out.Drift != 0 || !out.ConfigChanged {
		t.Fatalf("first reconcile: drift %d, changed %v", out.Drift, out.ConfigChanged)
	}
	// Same config, the cluster changed one object: drift.
	fa.set(apply.ActionConfigured)
	h.loop.Trigger()
	if diff := cmp.Diff(summary{Trigger: TriggerChange, Drift: 1, Companies: 1}, summarize(h.next())); diff != "" {
		t.Errorf("drift (-want +got):\n%s", diff)
	}
	if got := testutil.ToFloat64(h.metrics.DriftCorrections); got != 1 {
		t.Errorf("pcsync_drift_corrections_total = %v, want 1", got)
	}
	// A config change that configures objects is not drift.
	write(t, filepath.Join(h.dir, "acme.yaml"), company("acme")+"  quota: {pods: 5}\n")
	if out := h.next(); out.Drift != 0 || !out.ConfigChanged {
		t.Errorf("config change: drift %d, changed %v", out.Drift, out.ConfigChanged)
	}
	if got := testutil.ToFloat64(h.metrics.ObjectsApplied.WithLabelValues("configured")); got != 2 {
		t.Errorf(`pcsync_objects_applied_total{action="configured"} = %v, want 2`, got)
	}
}

func TestLoopWithoutApplierOnlyValidates(t *testing.T) {
	h := startLoop(t, nil)
	out := h.next()
	if out.Report != nil || out.Model == nil {
		t.Fatalf("validate-only loop: report %v, model %v", out.Report, out.Model)
	}
	select {
	case m := <-h.models:
		if len(m.Companies) != 1 {
			t.Errorf("model has %d companies", len(m.Companies))
		}
	default:
		t.Error("OnModel not called")
	}
	if n := testutil.CollectAndCount(h.metrics.ReconcileDuration); n != 0 {
		t.Errorf("a validate-only loop observed %d reconcile durations", n)
	}
}
