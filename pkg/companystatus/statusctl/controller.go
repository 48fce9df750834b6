package statusctl

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"

	"github.com/pcsync/pcsync/internal/lib/ctlqueue"
	cs "github.com/pcsync/pcsync/pkg/companystatus"
	"github.com/pcsync/pcsync/pkg/config"
	"github.com/pcsync/pcsync/pkg/reconcile"
)

// Controller keeps a CompanyStatus per company of the daemon's shard,
// from each reconcile's outcome (Observe), and answers reconcile requests
// (cs.AnnotationReconcileRequestedAt) with a reconcile. It reads the
// objects from an informer of its namespace and writes one only when what
// it holds differs: at rest it sends nothing.
type Controller struct {
	opts  Options
	log   *slog.Logger
	dyn   dynamic.Interface
	disc  discovery.DiscoveryInterface
	cs    kubernetes.Interface
	queue workqueue.TypedRateLimitingInterface[string]

	informer cache.SharedIndexInformer
	// recorder records Events on the objects; broadcaster sends them.
	broadcaster record.EventBroadcaster
	recorder    record.EventRecorder

	mu sync.Mutex
	// model is the last valid config (every shard's companies).
	model *config.Model
	// planned is each company's intent from the last reconcile, by name,
	// and at when it was planned.
	planned map[string]planned
	// held are the tenants whose deletion the prune guard held at the last
	// apply, and approve the command that approves it.
	held    map[string]bool
	hold    func(cs.Spec) intent
	pending map[string]request
	// answered are the requests a reconcile answered, by name, until the
	// object says so (its informer's next events may not yet).
	answered map[string]string
	// written are the objects the controller wrote that its informer may
	// not show yet (its expectations), by name.
	written map[string]*unstructured.Unstructured

	// off: the cluster does not serve CompanyStatus; nothing is planned.
	off atomic.Bool
	// done is closed once Run's work has ended (see Wait).
	done chan struct{}
}

type planned struct {
	intent
	at time.Time
}

// request is a reconcile request seen: its value and when.
type request struct {
	value string
	seen  time.Time
}

// New returns a controller of the CompanyStatus objects in
// opts.Namespace, on the cluster of cfg; Run starts it.
func New(cfg *rest.Config, opts Options) (*Controller, error) {
	if err := opts.complete(); err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("company status: cluster access: %w", err)
	}
	kc, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("company status: cluster access: %w", err)
	}
	c := &Controller{opts: opts, log: opts.Logger.With(slog.String("controller", "company-status")), dyn: dyn,
		disc: kc.Discovery(), cs: kc,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "company-status", MetricsProvider: opts.QueueMetrics}),
		planned: map[string]planned{}, held: map[string]bool{}, pending: map[string]request{}, answered: map[string]string{},
		written: map[string]*unstructured.Unstructured{}}
	return c, nil
}

// Run starts the controller and returns once its informer has listed the
// objects, its workers going on until ctx ends (Wait joins them). A
// cluster that does not serve CompanyStatus is no failure: the controller
// says so (log, CondRecorded) and records nothing.
func (c *Controller) Run(ctx context.Context) error {
	c.done = make(chan struct{})
	served, err := c.served()
	if err != nil {
		close(c.done)
		return fmt.Errorf("company status: %w", err)
	}
	if !served {
		c.log.Error("company status is not recorded: "+cs.ErrNoCRD.Error()+"; restart the daemon once it is installed",
			slog.String("namespace", c.opts.Namespace))
		c.condition(false, "CRDMissing", cs.ErrNoCRD.Error())
		c.off.Store(true)
		close(c.done)
		return nil
	}
	f := dynamicinformer.NewFilteredDynamicSharedInformerFactory(c.dyn, 0, c.opts.Namespace, nil)
	c.informer = f.ForResource(cs.GVR).Informer()
	if _, err := c.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: c.changed, UpdateFunc: func(_, cur any) { c.changed(cur) }, DeleteFunc: c.deleted,
	}); err != nil {
		close(c.done)
		return fmt.Errorf("company status: %w", err)
	}
	ictx, stopInformer := context.WithCancel(ctx)
	f.Start(ictx.Done())
	sctx, cancel := context.WithTimeout(ctx, c.opts.SyncTimeout)
	defer cancel()
	if !cache.WaitForCacheSync(sctx.Done(), c.informer.HasSynced) {
		stopInformer()
		f.Shutdown()
		close(c.done)
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("company status: %s in namespace %s not listed within %s", cs.Resource, c.opts.Namespace, c.opts.SyncTimeout)
	}
	c.broadcaster = record.NewBroadcaster(record.WithContext(ctx))
	c.broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: c.cs.CoreV1().Events(c.opts.Namespace)})
	c.recorder = c.broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "pcsync"})
	c.condition(true, "Recording", "the daemon records each company's status in "+cs.Resource+" of namespace "+c.opts.Namespace)
	c.enqueueRemoved()
	ctlqueue.Run(ctx, c.queue, c.opts.Workers, c.work, func() {
		stopInformer()
		f.Shutdown()
		c.broadcaster.Shutdown()
	}, c.done)
	return nil
}

// Wait returns once the controller has stopped after Run's context ended
// (at once after a Run that failed); call it only after Run returned.
func (c *Controller) Wait() {
	if c.done != nil {
		<-c.done
	}
}

// served says whether the cluster serves CompanyStatus.
func (c *Controller) served() (bool, error) {
	l, err := c.disc.ServerResourcesForGroupVersion(cs.APIVersion)
	if err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return false, fmt.Errorf("discovery of %s: %w", cs.APIVersion, err)
	}
	return slices.ContainsFunc(l.APIResources, func(r metav1.APIResource) bool { return r.Name == cs.Resource }), nil
}

// condition sets CondRecorded when the controller has a health checker.
func (c *Controller) condition(ok bool, reason, msg string) {
	if c.opts.Health != nil {
		c.opts.Health.Set(CondRecorded, ok, false, reason, msg)
	}
}

func (c *Controller) work(ctx context.Context) {
	ctlqueue.Work(ctx, c.queue, c.sync, func(name string, err error) {
		if ctx.Err() == nil {
			c.log.Warn("company status not written", slog.String("company", name), slog.Any("error", err))
			c.condition(false, "WriteFailed", err.Error())
		}
	})
}

// Observe takes a reconcile's outcome (reconcile.Options.Observe): the
// companies whose intent changed are queued, and the reconcile requests
// seen before it began are answered.
func (c *Controller) Observe(out reconcile.Outcome) {
	if c.off.Load() {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if out.Model != nil {
		c.model = out.Model
	}
	if c.model == nil {
		return
	}
	if r := out.Report; r != nil && !r.Partial {
		c.held, c.hold = map[string]bool{}, nil
		if h := r.PruneHeld; h != nil {
			for _, ns := range h.Tenants {
				c.held[ns] = true
			}
			approve := h.ApproveCommand(r.Parent)
			c.hold = func(s cs.Spec) intent { return pruneHeld(s, h, approve) }
		}
	}
	at := c.opts.Now()
	next := map[string]planned{}
	for name, in := range intents(out, c.model, c.opts.Shard) {
		if p, ok := c.pending[name]; ok && p.seen.Before(out.Started) {
			in.handled, c.answered[name] = p.value, p.value
			delete(c.pending, name)
		}
		if prev, ok := c.planned[name]; ok && in.handled == "" {
			in.handled = prev.handled
		}
		next[name] = planned{intent: in, at: at}
	}
	c.replanLocked(next)
}

// replanLocked makes next (and the removed companies' deletions) the
// plan, and queues the companies whose intent changed. A company another
// shard serves now has no plan: its object is that shard's to write.
func (c *Controller) replanLocked(next map[string]planned) {
	c.removedLocked(next)
	for name, p := range next {
		if prev, ok := c.planned[name]; ok && prev.intent == p.intent {
			next[name] = prev
			continue
		}
		c.queue.Add(name)
	}
	c.planned = next
}

// enqueueRemoved plans (and queues) the deletion of the controller's
// objects whose company left the config, once the informer has listed.
func (c *Controller) enqueueRemoved() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.model != nil {
		c.replanLocked(maps.Clone(c.planned))
	}
}

// removedLocked adds to next, for each of the controller's objects whose
// company is in no shard of the config, its deletion, or while the prune
// guard holds its tenant's deletion, PruneHeld.
func (c *Controller) removedLocked(next map[string]planned) {
	if c.informer == nil {
		return
	}
	// What the controller wrote that the informer does not show yet is
	// counted too: a company written and removed in the next reconcile
	// would otherwise keep its object until the reconcile after.
	objs := c.informer.GetStore().List()
	for _, w := range c.written {
		objs = append(objs, w)
	}
	for _, o := range objs {
		u, ok := o.(*unstructured.Unstructured)
		if !ok || u.GetLabels()[cs.LabelOwner] != c.opts.Owner {
			continue
		}
		if _, ok := c.model.Company(u.GetName()); ok {
			continue
		}
		obj, err := cs.FromUnstructured(u)
		if err != nil {
			continue
		}
		in := intent{spec: obj.Spec, gone: true}
		if c.held[obj.Spec.Namespace] && c.hold != nil {
			in = c.hold(obj.Spec)
		}
		next[u.GetName()] = planned{intent: in, at: c.opts.Now()}
	}
}
