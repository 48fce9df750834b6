//go:build integration

package daemon

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"

	"github.com/pcsync/pcsync/pkg/apply"
	"github.com/pcsync/pcsync/pkg/reconcile"
	"github.com/pcsync/pcsync/pkg/result"
	"github.com/pcsync/pcsync/pkg/runs"
)

// TestShardsHandOverACompany: two daemons share one cluster, shard "a" and
// shard "b", each with its own ApplySet and spool. Each applies only its
// companies. Company "mv" moves from a to b (its label edited in the
// config) while a run of it goes on in a: its tenant ends up in b's
// ApplySet with none of its objects deleted in between, and a touches it no
// more; a rejects a new run of it naming shard "b", b runs one, and the run
// a started finishes in a.
func TestShardsHandOverACompany(t *testing.T) {
	e := newEnv(t)
	sharded := func(slug, shard string) string {
		return strings.Replace(company(slug, ""), "metadata: {name: \""+slug+"\"}",
			"metadata: {name: \""+slug+"\", labels: {pcsync.io/shard: "+shard+"}}", 1)
	}
	e.files(e.dir, map[string]string{"a1.yaml": sharded("a1", "a"), "b1.yaml": sharded("b1", "b"), "mv.yaml": sharded("mv", "a")})
	setA, setB := apply.ParentID("pcsync-a", e.ns), apply.ParentID("pcsync-b", e.ns)
	spoolA, spoolB := filepath.Join(e.root, "spool-a"), filepath.Join(e.root, "spool-b")
	for _, d := range []string{spoolA, spoolB} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	held := newHoldExecutor()
	a := e.start(daemonConfig{name: "a", shard: "a", prune: true, interval: time.Hour, runs: true, spool: spoolA, exec: held})
	b := e.start(daemonConfig{name: "b", shard: "b", prune: true, interval: time.Hour, runs: true, spool: spoolB})

	e.waitFor("each shard's companies in its set", func(ctx context.Context) bool {
		return e.partOf(ctx, "a1") == setA && e.partOf(ctx, "mv") == setA && e.partOf(ctx, "b1") == setB
	})
	e.checkTouched(a, "b1", "a")
	e.checkTouched(b, "a1", "b")
	e.checkTouched(b, "mv", "b")

	// A run of mv starts in a and goes on.
	dropRun(t, spoolA, "first", "mv")
	e.waitFor("a starts the first run", func(context.Context) bool { return slices.Contains(held.started(), "first") })

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	uids := e.uids(ctx, "mv")
	deletes := e.watchDeletes(ctx, "mv")

	e.files(e.dir, map[string]string{"mv.yaml": sharded("mv", "b")})
	e.waitFor("mv taken into b's set", func(ctx context.Context) bool {
		for _, set := range e.partOfAll(ctx, "mv") {
			if set != setB {
				return false
			}
		}
		return true
	})
	e.waitFor("b's parent lists mv's namespace", func(ctx context.Context) bool {
		p, err := e.c.Client().CoreV1().Secrets(e.ns).Get(ctx, "pcsync-b", metav1.GetOptions{})
		return err == nil && strings.Contains(p.Annotations[apply.AnnotationAdditionalNamespaces], e.namespace("mv"))
	})
	// a reconciles the moved config at least twice more (a file event, then
	// the trigger below), touching nothing of mv's.
	moved := func(out reconcile.Outcome) bool {
		c, ok := out.Model.Company("mv")
		return ok && c.Shard() == "b"
	}
	e.waitFor("a loads the move", func(context.Context) bool { return slices.ContainsFunc(a.reconciles(), moved) })
	writeAtomic(t, filepath.Join(e.dir, "a1.yaml"), sharded("a1", "a")+"  quota: {pods: 21}\n")
	e.waitFor("a applies its next change", func(ctx context.Context) bool { return e.quotaPods(ctx, "a1") == "21" })
	for _, out := range a.reconciles() {
		if out.Model != nil && moved(out) {
			e.checkOutcome(out, "mv", "a")
		}
	}

	// Runs: a rejects a new run of mv, b runs one, a's first run ends in a.
	dropRun(t, spoolA, "second", "mv")
	if r := waitResult(t, e, spoolA, "second"); r.Status != result.StatusRejected ||
		!strings.Contains(msg(r), `shard "b"`) || !strings.Contains(msg(r), `shard "a"`) {
		t.Errorf("a's result of a new run of mv = %s %q, want rejected naming shards a and b", r.Status, msg(r))
	}
	dropRun(t, spoolB, "third", "mv")
	if r := waitResult(t, e, spoolB, "third"); r.Status != result.StatusSucceeded {
		t.Errorf("b's result of a new run of mv = %s %q, want succeeded", r.Status, msg(r))
	}
	held.release()
	if r := waitResult(t, e, spoolA, "first"); r.Status != result.StatusSucceeded {
		t.Errorf("a's first run = %s %q, want succeeded", r.Status, msg(r))
	}
	if got := held.started(); !slices.Equal(got, []string{"first"}) {
		t.Errorf("a started %v, want [first]", got)
	}
	if got := b.exec.runs(); !slices.Equal(got, []string{"third"}) {
		t.Errorf("b started %v, want [third]", got)
	}

	cancel()
	if d := <-deletes; len(d) > 0 {
		t.Errorf("objects of mv deleted during the move: %v", d)
	}
	if got := e.uids(context.Background(), "mv"); !maps.Equal(got, uids) {
		t.Errorf("mv's objects after the move (kind/name → uid) = %v, want the same as before %v", got, uids)
	}
}

// msg is a result's error message, "" for none.
func msg(r result.RunResult) string {
	if r.ErrorMessage == nil {
		return ""
	}
	return *r.ErrorMessage
}

// tenantKinds are the resources of a tenant the shard test looks at, by
// kind.
var tenantKinds = map[string]schema.GroupVersionResource{
	"ServiceAccount": {Version: "v1", Resource: "serviceaccounts"},
	"ResourceQuota":  {Version: "v1", Resource: "resourcequotas"},
	"LimitRange":     {Version: "v1", Resource: "limitranges"},
	"Role":           {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "roles"},
	"RoleBinding":    {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "rolebindings"},
	"NetworkPolicy":  {Group: "networking.k8s.io", Version: "v1", Resource: "networkpolicies"},
	"Deployment":     {Group: "apps", Version: "v1", Resource: "deployments"},
	"Service":        {Version: "v1", Resource: "services"},
}

// partOf is the ApplySet label of slug's Namespace.
func (e *env) partOf(ctx context.Context, slug string) string {
	ns, err := e.c.Client().CoreV1().Namespaces().Get(ctx, e.namespace(slug), metav1.GetOptions{})
	if err != nil {
		return ""
	}
	return ns.Labels[apply.LabelPartOf]
}

// partOfAll is the ApplySet label of slug's Namespace and of each of its
// objects of tenantKinds, by kind/name.
func (e *env) partOfAll(ctx context.Context, slug string) map[string]string {
	out := map[string]string{"Namespace": e.partOf(ctx, slug)}
	for k, o := range e.objects(ctx, slug) {
		out[k] = o.GetLabels()[apply.LabelPartOf]
	}
	return out
}

// uids are the UIDs of slug's Namespace and objects, by kind/name.
func (e *env) uids(ctx context.Context, slug string) map[string]types.UID {
	out := map[string]types.UID{}
	if ns, err := e.c.Client().CoreV1().Namespaces().Get(ctx, e.namespace(slug), metav1.GetOptions{}); err == nil {
		out["Namespace"] = ns.UID
	}
	for k, o := range e.objects(ctx, slug) {
		out[k] = o.GetUID()
	}
	return out
}

// objects lists slug's objects of tenantKinds that pcsync applied, by
// kind/name.
func (e *env) objects(ctx context.Context, slug string) map[string]metav1.Object {
	dyn := e.dynamic()
	out := map[string]metav1.Object{}
	for kind, gvr := range tenantKinds {
		list, err := dyn.Resource(gvr).Namespace(e.namespace(slug)).List(ctx,
			metav1.ListOptions{LabelSelector: "app.kubernetes.io/managed-by=pcsync"})
		if err != nil {
			e.t.Errorf("list %s of %s: %v", kind, slug, err)
			continue
		}
		for i := range list.Items {
			out[kind+"/"+list.Items[i].GetName()] = &list.Items[i]
		}
	}
	return out
}

// dynamic is a client of the test cluster that polls without a rate limit.
func (e *env) dynamic() *dynamic.DynamicClient {
	cfg := e.c.RESTConfig()
	cfg.QPS, cfg.Burst = -1, 0
	return dynamic.NewForConfigOrDie(cfg)
}

// watchDeletes watches slug's Namespace and objects until ctx ends, then
// sends what was deleted, or began to be, meanwhile.
func (e *env) watchDeletes(ctx context.Context, slug string) <-chan []string {
	e.t.Helper()
	dyn := e.dynamic()
	type source struct {
		kind string
		w    watch.Interface
	}
	var sources []source
	nsw, err := dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}).Watch(ctx,
		metav1.ListOptions{FieldSelector: "metadata.name=" + e.namespace(slug)})
	if err != nil {
		e.t.Fatal(err)
	}
	sources = append(sources, source{"Namespace", nsw})
	for kind, gvr := range tenantKinds {
		w, err := dyn.Resource(gvr).Namespace(e.namespace(slug)).Watch(ctx, metav1.ListOptions{})
		if err != nil {
			e.t.Fatal(err)
		}
		sources = append(sources, source{kind, w})
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	var deleted []string
	for _, s := range sources {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer s.w.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case ev, ok := <-s.w.ResultChan():
					if !ok {
						return
					}
					o, isObj := ev.Object.(metav1.Object)
					if isObj && (ev.Type == watch.Deleted || o.GetDeletionTimestamp() != nil) {
						mu.Lock()
						deleted = append(deleted, s.kind+"/"+o.GetName())
						mu.Unlock()
					}
				}
			}
		}()
	}
	out := make(chan []string, 1)
	go func() {
		wg.Wait()
		out <- deleted
	}()
	return out
}

// checkTouched fails when a daemon's reconciles applied or pruned an
// object of slug's tenant.
func (e *env) checkTouched(d *daemonRun, slug, daemon string) {
	e.t.Helper()
	for _, out := range d.reconciles() {
		e.checkOutcome(out, slug, daemon)
	}
}

// checkOutcome fails when out's report names an object of slug's tenant.
func (e *env) checkOutcome(out reconcile.Outcome, slug, daemon string) {
	e.t.Helper()
	if out.Report == nil {
		return
	}
	ns := e.namespace(slug)
	for _, c := range out.Report.Objects {
		if c.Ref.Namespace == ns || c.Ref.Kind == "Namespace" && c.Ref.Name == ns {
			e.t.Errorf("daemon %s touched %s of %s's tenant: %s", daemon, c.Ref, slug, c.Action)
		}
	}
}

// holdExecutor starts runs that go on until release.
type holdExecutor struct {
	mu      sync.Mutex
	ids     []string
	done    chan struct{}
	release func()
}

func newHoldExecutor() *holdExecutor {
	h := &holdExecutor{done: make(chan struct{})}
	h.release = sync.OnceFunc(func() { close(h.done) })
	return h
}

func (h *holdExecutor) Name() string { return "hold" }

func (h *holdExecutor) Start(_ context.Context, r *runs.Run) (runs.Handle, error) {
	h.mu.Lock()
	h.ids = append(h.ids, r.RunID)
	h.mu.Unlock()
	return &heldRun{h: h, r: r}, nil
}

func (h *holdExecutor) Adopt(context.Context, *runs.Run) (runs.Handle, error) {
	return nil, runs.ErrNotStarted
}

func (h *holdExecutor) started() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.ids)
}

// heldRun succeeds once its executor is released.
type heldRun struct {
	h *holdExecutor
	r *runs.Run
}

func (r *heldRun) Wait(ctx context.Context) (runs.Ending, error) {
	select {
	case <-r.h.done:
	case <-ctx.Done():
		return runs.Ending{}, ctx.Err()
	}
	res := result.New(r.r.RunID, r.r.Company.Slug(), r.r.Agent.Name, string(r.r.Agent.Adapter))
	res.Status = result.StatusSucceeded
	res.ExitCode = result.Ptr(0)
	now := time.Now()
	res.SetTimes(now, now)
	return runs.Ending{Result: res}, nil
}

func (r *heldRun) Cancel()                       {}
func (r *heldRun) Release(context.Context) error { return nil }
