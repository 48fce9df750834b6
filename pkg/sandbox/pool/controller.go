package sandbox

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/pcsync/pcsync/internal/lib/agentpod"
	"github.com/pcsync/pcsync/pkg/config"
	"github.com/pcsync/pcsync/pkg/tenantns"
)

// poolIndex indexes the members in the cache by their pool's key.
const poolIndex = "pool"

// poolWorkers is how many pools sync at once (one pool never syncs twice
// at once: the workqueue's promise).
const poolWorkers = 2

// poolController keeps every declared warm pool at its count of members,
// in the shape of client-go's controllers: an informer of the members
// (pods labelled LabelPool and its own LabelPoolOwner, in every namespace)
// and its lister; a rate-limited workqueue of pool keys (namespace and
// spec hash) that the informer's events, a changed config (pushed by
// Manager.ConfigChanged, else found every Resync) and the end of a burst
// of acquires fill; one sync(key) that compares the pool's
// declaration with its members in the lister (sync.go); and expectations
// for the creates and deletes in flight. A restarted daemon's informer
// lists the members of the one before: it adopts them, and creates only
// what is missing. Members of another owner it never sees. Of the
// controllers of one owner (two daemons on one ApplySet), only the holder
// of the owner's Lease syncs; the others stand by (pool_lease.go).
type poolController struct {
	poolDeps
	informer cache.SharedIndexInformer
	lister   corelisters.PodLister
	queue    workqueue.TypedRateLimitingInterface[poolKey]
	exp      *expectations
	holds    *nsHolds
	// cfg is the config the pools were last declared from.
	cfg atomic.Pointer[poolConfig]
	// pushed wakes the config loop for a new config (one wake pending at
	// most).
	pushed chan struct{}
	// claimed marks the members (by UID) that a claim or a shrink took,
	// until the informer sees them leave: no sync counts or deletes them,
	// no other claim takes them. A mark is per member: no lock of the
	// controller's.
	claimed sync.Map
	// reported are the companies whose pools the metrics were last given
	// (the config loop's goroutine only).
	reported map[string]bool

	// acting guards leading: a sync runs holding it for reading, and the
	// end of a leadership waits for the syncs in flight (pool_lease.go).
	acting sync.RWMutex
	// leading is set while this controller holds its owner's Lease: only
	// then do its pools sync.
	leading bool
	// holder is the identity of the controller that holds the owner's
	// Lease, as last observed; nil before one is.
	holder atomic.Pointer[string]

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// poolDeps is what the controller takes from the Manager: the cluster, the
// config and how a pool's member is built; it holds no Manager.
type poolDeps struct {
	cs      kubernetes.Interface
	log     *slog.Logger
	metrics Metrics
	opts    PoolOptions
	tenants *tenantns.Guard
	// model is the current config; nil before the first.
	model func() *config.Model
	// declare gives a config's declared pools.
	declare func(*config.Model) map[poolKey]*poolDecl
	// build gives a new member of a pool.
	build func(*poolDecl, *config.Model, time.Time) (*corev1.Pod, Record, error)
	// ready is told of a Ready member of pool d (its stream is opened
	// ahead of its claim), gone of a member that left the pool.
	ready func(pod *corev1.Pod, d *poolDecl)
	gone  func(uid types.UID)
}

// poolConfig is a config and the pools it declares.
type poolConfig struct {
	model *config.Model
	pools map[poolKey]*poolDecl
}

// poolRateLimiter spaces the retries of a pool whose sync failed (its
// tenant not applied yet, the API server away): 50ms doubling to 30s, and
// at most 10 a second over all pools (a burst of 100).
func poolRateLimiter() workqueue.TypedRateLimiter[poolKey] {
	return workqueue.NewTypedMaxOfRateLimiter(
		workqueue.NewTypedItemExponentialFailureRateLimiter[poolKey](50*time.Millisecond, 30*time.Second),
		&workqueue.TypedBucketRateLimiter[poolKey]{Limiter: rate.NewLimiter(rate.Limit(10), 100)},
	)
}

// startPools starts the warm pools' controller. A daemon that cannot
// watch pods keeps no pool (and says so): leases start cold.
func (m *Manager) startPools(ctx context.Context) {
	if m.opts.Pool.Disabled {
		return
	}
	c := newPoolController(poolDeps{cs: m.cs, log: m.log, metrics: m.opts.Metrics, opts: m.opts.Pool, tenants: m.tenants,
		model: m.model, declare: m.declaredPools, build: m.buildMember, ready: m.memberReady, gone: m.memberGone})
	if err := c.start(ctx); err != nil {
		m.log.Warn("sandbox: no warm pools: the daemon cannot list and watch pods (cluster-wide get, list, watch on pods); leases start cold", slog.Any("error", err))
		return
	}
	m.pools = c
}

func newPoolController(d poolDeps) *poolController {
	selector := agentpod.LabelManagedBy + "=" + agentpod.ManagedByValue + "," + LabelPool + "," + LabelPoolOwner + "=" + d.opts.Owner
	f := informers.NewSharedInformerFactoryWithOptions(d.cs, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.LabelSelector = selector
	}))
	pods := f.Core().V1().Pods()
	c := &poolController{poolDeps: d, informer: pods.Informer(), lister: pods.Lister(),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(poolRateLimiter(),
			workqueue.TypedRateLimitingQueueConfig[poolKey]{Name: "sandbox-pools"}),
		exp:      newExpectations(d.opts.PendingTTL, time.Now),
		holds:    &nsHolds{quotaBackoff: d.opts.QuotaBackoff, coldHold: d.opts.ColdHold},
		pushed:   make(chan struct{}, 1),
		reported: map[string]bool{}}
	_ = c.informer.AddIndexers(cache.Indexers{poolIndex: func(obj any) ([]string, error) {
		if k, ok := memberKey(obj); ok {
			return []string{k.String()}, nil
		}
		return nil, nil
	}})
	_, _ = c.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.added,
		UpdateFunc: c.updated,
		DeleteFunc: c.deleted,
	})
	return c
}

// start runs the informer, waits for its first list (30s at most), and
// starts the config loop, the workers and the owner's election (the
// workers sync only while this controller holds the owner's Lease).
func (c *poolController) start(ctx context.Context) error {
	run, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		c.informer.RunWithContext(run)
	}()
	sctx, scancel := context.WithTimeout(ctx, 30*time.Second)
	defer scancel()
	if !cache.WaitForCacheSync(sctx.Done(), c.informer.HasSynced) {
		c.close()
		return sctx.Err()
	}
	c.configChanged()
	c.report()
	c.wg.Add(2 + poolWorkers)
	go func() {
		defer c.wg.Done()
		c.configLoop(run)
	}()
	go func() {
		defer c.wg.Done()
		c.elect(run)
	}()
	for range poolWorkers {
		go func() {
			defer c.wg.Done()
			for c.next(run) {
			}
		}()
	}
	return nil
}

// close stops the controller and releases the owner's Lease if it held
// it; the members stay for the next daemon, or the standby.
func (c *poolController) close() {
	c.cancel()
	c.queue.ShutDown()
	c.wg.Wait()
}

// next syncs the next pool of the queue; false once the queue shuts down.
// A sync that fails is retried with the queue's backoff.
func (c *poolController) next(ctx context.Context) bool {
	k, quit := c.queue.Get()
	if quit {
		return false
	}
	defer c.queue.Done(k)
	if err := c.syncIfLeading(ctx, k); err != nil {
		if ctx.Err() == nil {
			c.log.Warn("sandbox: warm pool sync failed; retrying", slog.String("pool", k.String()), slog.Any("error", err))
		}
		c.queue.AddRateLimited(k)
		return true
	}
	c.queue.Forget(k)
	return true
}

// memberKey is the pool of a member (a pod, or the informer's last state
// of a deleted one).
func memberKey(obj any) (poolKey, bool) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return poolKey{}, false
	}
	return poolKey{Namespace: p.Namespace, Hash: p.Labels[LabelPool]}, true
}

func (c *poolController) added(obj any) {
	if k, ok := memberKey(obj); ok {
		c.exp.created(k, obj.(*corev1.Pod).Name)
		c.seen(k, obj.(*corev1.Pod))
		c.queue.Add(k)
	}
}

// seen passes on a member of pool k that is Ready (and not claimed nor
// going) to ready, and one being deleted to gone.
func (c *poolController) seen(k poolKey, pod *corev1.Pod) {
	switch {
	case pod.DeletionTimestamp != nil:
		if c.gone != nil {
			c.gone(pod.UID)
		}
	case c.ready == nil || !agentpod.Ready(pod):
	default:
		if _, taken := c.claimed.Load(pod.UID); taken {
			return
		}
		if d := c.declared(k); d != nil {
			c.ready(pod, d)
		}
	}
}

// updated requeues the member's pool; a member seen Ready for the first
// time gives the refill metric its time from its creation, and one being
// deleted meets its delete's expectation.
func (c *poolController) updated(old, obj any) {
	was, _ := old.(*corev1.Pod)
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	k, _ := memberKey(pod)
	if was != nil && !agentpod.Ready(was) && agentpod.Ready(pod) {
		c.metrics.SandboxPoolReady(agentpod.CompanyOf(pod.Labels), time.Since(pod.CreationTimestamp.Time))
	}
	if pod.DeletionTimestamp != nil {
		c.exp.deleted(k, pod.Name)
	}
	c.seen(k, pod)
	c.queue.Add(k)
}

// deleted: a member left the cache (claimed, or gone). One that left with
// no deletion begun, and not by the controller's own delete, was claimed
// (by this daemon or another): its pool's namespace is held for the
// company's refill delay before the pool refills.
func (c *poolController) deleted(obj any) {
	k, ok := memberKey(obj)
	if !ok {
		return
	}
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	pod := obj.(*corev1.Pod)
	if c.gone != nil {
		c.gone(pod.UID) // a claim took its stream before
	}
	c.claimed.Delete(pod.UID)
	ours := c.exp.deleted(k, pod.Name)
	if d := c.declared(k); d != nil && !ours && pod.DeletionTimestamp == nil {
		c.holds.claimed(k.Namespace, time.Now(), d.refillDelay)
	}
	c.queue.Add(k)
}

// acquiring counts an acquire of namespace ns in flight (nsHolds); the
// last one's end requeues the namespace's pools.
func (c *poolController) acquiring(ns string) func() {
	return c.holds.acquiring(ns, time.Now(), func() { c.enqueueNamespace(ns) })
}

// enqueueNamespace queues every declared pool of namespace ns.
func (c *poolController) enqueueNamespace(ns string) {
	if cfg := c.cfg.Load(); cfg != nil {
		for k := range cfg.pools {
			if k.Namespace == ns {
				c.queue.Add(k)
			}
		}
	}
}

// declared is pool k's declaration; nil when the config declares no such
// pool.
func (c *poolController) declared(k poolKey) *poolDecl {
	if cfg := c.cfg.Load(); cfg != nil {
		return cfg.pools[k]
	}
	return nil
}
