package scale

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/pcsync/pcsync/internal/lib/ctlqueue"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/pcsync/pcsync/internal/lib/agentpod"
	"github.com/pcsync/pcsync/pkg/egressproxy/allow"
)

// FieldManager owns the proxies' replicas.
const FieldManager = "pcsync-proxy-scale"

// IdleFunc says how long namespace ns's proxy stays up with nothing to
// serve (0: always), and false for a namespace that is no company's.
type IdleFunc func(ns string) (time.Duration, bool)

// Options tune a Controller.
type Options struct {
	// Idle is each namespace's idle period. Required.
	Idle IdleFunc
	// NeedFor is how long Need keeps a namespace busy before its pod is
	// seen. Default 2 min.
	NeedFor time.Duration
	// Workers sync namespaces at once. Default 2.
	Workers int
	Logger  *slog.Logger
	// QueueMetrics receives the workqueue's metrics (queue "proxy-scale").
	QueueMetrics workqueue.MetricsProvider
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

// DefaultOptions returns the options used for zero fields.
func DefaultOptions() Options {
	return Options{NeedFor: 2 * time.Minute, Workers: 2, Logger: slog.Default(), Now: time.Now}
}

func (o *Options) complete() {
	d := DefaultOptions()
	o.NeedFor = cmp.Or(o.NeedFor, d.NeedFor)
	o.Workers = cmp.Or(max(o.Workers, 0), d.Workers)
	o.Logger = cmp.Or(o.Logger, d.Logger)
	if o.Now == nil {
		o.Now = d.Now
	}
}

// mark is when a namespace was last seen busy, and whether it was then.
type mark struct {
	at   time.Time
	busy bool
}

// Controller scales the tenants' egress proxies.
type Controller struct {
	cs      kubernetes.Interface
	opts    Options
	pods    cache.SharedIndexInformer
	deploys cache.SharedIndexInformer
	lister  appslisters.DeploymentLister
	factory informers.SharedInformerFactory
	queue   workqueue.TypedRateLimitingInterface[string]

	mu sync.Mutex
	// busy is when each namespace was last seen busy (or first seen).
	busy map[string]mark
	// needed is until when Need keeps a namespace busy.
	needed map[string]time.Time
	// replicas are each proxy's replicas at its last sync.
	replicas map[string]int32
	// waking is when Need found each proxy asleep, until it is available.
	waking map[string]time.Time
	// ready is closed and replaced when a proxy's ready replicas change.
	ready chan struct{}
	// done is closed once Run's work has ended (see Wait).
	done chan struct{}
}

// New returns the controller (not started). pods is the daemon's shared
// informer of pcsync's pods, started by its owner.
func New(cs kubernetes.Interface, pods cache.SharedIndexInformer, opts Options) (*Controller, error) {
	if opts.Idle == nil {
		return nil, fmt.Errorf("proxy scale: no idle periods (Options.Idle)")
	}
	opts.complete()
	f := informers.NewSharedInformerFactoryWithOptions(cs, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", allow.ProxyName).String()
		}))
	di := f.Apps().V1().Deployments()
	_ = di.Informer().SetTransform(slimDeployment)
	c := &Controller{cs: cs, opts: opts, pods: pods, deploys: di.Informer(), lister: di.Lister(), factory: f,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "proxy-scale", MetricsProvider: opts.QueueMetrics}),
		busy: map[string]mark{}, needed: map[string]time.Time{}, replicas: map[string]int32{}, waking: map[string]time.Time{}, ready: make(chan struct{})}
	return c, nil
}

// Run starts the Deployments' watch and the pods' handler, waits for both
// to list, and syncs until ctx ends; it returns once synced, with the
// workers running in the background.
func (c *Controller) Run(ctx context.Context) error {
	_, _ = c.deploys.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.deploymentChanged,
		UpdateFunc: func(_, cur any) { c.deploymentChanged(cur) },
		DeleteFunc: c.deploymentChanged,
	})
	if _, ok := c.pods.GetIndexer().GetIndexers()[cache.NamespaceIndex]; !ok {
		if err := c.pods.AddIndexers(cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}); err != nil {
			return fmt.Errorf("proxy scale: pods by namespace: %w", err)
		}
	}
	reg, err := c.pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.podChanged,
		UpdateFunc: func(old, cur any) { c.podUpdated(old, cur) },
		DeleteFunc: c.podChanged,
	})
	if err != nil {
		return fmt.Errorf("proxy scale: pods: %w", err)
	}
	c.done = make(chan struct{})
	c.factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), c.deploys.HasSynced, reg.HasSynced) {
		// Only ctx ends the wait: the watch's goroutines end with it.
		c.queue.ShutDown()
		_ = c.pods.RemoveEventHandler(reg)
		c.factory.Shutdown()
		close(c.done)
		return fmt.Errorf("proxy scale: proxies and pods not listed: %w", context.Cause(ctx))
	}
	ctlqueue.Run(ctx, c.queue, c.opts.Workers, c.work, func() {
		_ = c.pods.RemoveEventHandler(reg)
		c.factory.Shutdown()
	}, c.done)
	return nil
}

// Wait returns once the controller has stopped after Run's context ended:
// its workers returned, its pods' handler removed, its Deployments' watch
// ended. After a Run that failed it returns at once; call it only after
// Run has returned.
func (c *Controller) Wait() {
	if c.done != nil {
		<-c.done
	}
}

func (c *Controller) work(ctx context.Context) {
	for c.next(ctx) {
	}
}

// next syncs the next namespace of the queue, and says false once the
// queue shuts down.
func (c *Controller) next(ctx context.Context) bool {
	ns, quit := c.queue.Get()
	if quit {
		return false
	}
	defer c.queue.Done(ns)
	after, err := c.sync(ctx, ns)
	if err != nil {
		c.opts.Logger.Warn("egress proxy scale failed", "namespace", ns, "error", err)
		c.queue.AddRateLimited(ns)
		return true
	}
	c.queue.Forget(ns)
	if after > 0 {
		c.queue.AddAfter(ns, after)
	}
	return true
}

// deploymentChanged queues a proxy's namespace and wakes Ready's waiters.
func (c *Controller) deploymentChanged(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	if d, ok := obj.(*appsv1.Deployment); ok {
		c.queue.Add(d.Namespace)
		c.mu.Lock()
		close(c.ready)
		c.ready = make(chan struct{})
		c.mu.Unlock()
	}
}

// podChanged queues the namespace of an agent pod.
func (c *Controller) podChanged(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	if p, ok := obj.(*corev1.Pod); ok && isAgent(p) {
		c.queue.Add(p.Namespace)
	}
}

// podUpdated queues the namespace of an agent pod that ended.
func (c *Controller) podUpdated(old, cur any) {
	o, ok1 := old.(*corev1.Pod)
	n, ok2 := cur.(*corev1.Pod)
	if ok1 && ok2 && isAgent(n) && live(o) != live(n) {
		c.queue.Add(n.Namespace)
	}
}

func isAgent(p *corev1.Pod) bool { return p.Labels[agentpod.LabelRole] == agentpod.RoleAgent }

// live reports whether an agent pod still needs its proxy: not deleting,
// its phase not final.
func live(p *corev1.Pod) bool {
	return p.DeletionTimestamp == nil && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed
}

// slimDeployment keeps of a proxy's Deployment what the controller reads.
func slimDeployment(obj any) (any, error) {
	d, ok := obj.(*appsv1.Deployment)
	if !ok {
		return obj, nil
	}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: d.Name, Namespace: d.Namespace, UID: d.UID, ResourceVersion: d.ResourceVersion,
			Labels: d.Labels, CreationTimestamp: d.CreationTimestamp, DeletionTimestamp: d.DeletionTimestamp, Generation: d.Generation},
		Spec: appsv1.DeploymentSpec{Replicas: d.Spec.Replicas},
		Status: appsv1.DeploymentStatus{ObservedGeneration: d.Status.ObservedGeneration, Replicas: d.Status.Replicas,
			ReadyReplicas: d.Status.ReadyReplicas, AvailableReplicas: d.Status.AvailableReplicas},
	}, nil
}
