package pool

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/pcsync/pcsync/internal/lib/agentpod"
	"github.com/pcsync/pcsync/internal/lib/podinformer"
	"github.com/pcsync/pcsync/pkg/config"
	"github.com/pcsync/pcsync/pkg/sandbox/leasepod"
	"github.com/pcsync/pcsync/pkg/tenantns"
)

// poolIndexPrefix and the owner name the index of an owner's members by
// their pool's key, in the daemon's pod informer.
const poolIndexPrefix = "sandbox-pool/"

// poolWorkers is how many pools sync at once (one pool never syncs twice
// at once: the workqueue's promise).
const poolWorkers = 2

// Controller keeps every declared warm pool at its count of members,
// in the shape of client-go's controllers: a handler, an index and a
// lister on the daemon's informer of pcsync's pods (Deps.Pods), which see
// only the members (pods labelled Label and its own LabelOwner, in every
// namespace; a member claimed leaves them); a rate-limited workqueue of
// pool keys (namespace and spec hash) that the informer's events, a
// changed config (pushed by ConfigChanged, else found every Resync) and
// the end of a burst of acquires fill; one sync(key) that compares the
// pool's declaration with its members in the lister (sync.go); and
// expectations for the creates and deletes in flight. A restarted daemon's informer
// lists the members of the one before: it adopts them, and creates only
// what is missing. Members of another owner it never sees. Of the
// controllers of one owner (two daemons on one ApplySet), only the holder
// of the owner's Lease syncs; the others stand by (lease.go).
type Controller struct {
	deps
	informer cache.SharedIndexInformer
	lister   corelisters.PodLister
	// index is the name of the owner's index in informer.
	index string
	// reg is the controller's handler on informer, from Start to Close.
	reg   cache.ResourceEventHandlerRegistration
	queue workqueue.TypedRateLimitingInterface[Key]
	exp   *expectations
	holds *nsHolds
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
	// end of a leadership waits for the syncs in flight (lease.go).
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

// Deps is what the controller takes from the sandbox Manager: the
// cluster, the config, how a member's record is placed, and what it is
// told of members; it holds no Manager.
type Deps struct {
	Client kubernetes.Interface
	// Pods is the daemon's informer of pcsync's pods (podinformer),
	// running or started later: the controller adds its index and handler
	// on Start and removes the handler on Close.
	Pods    cache.SharedIndexInformer
	Log     *slog.Logger
	Metrics Metrics
	// QueueMetrics receives the pools' workqueue metrics (queue
	// "sandbox-pools"); nil: none.
	QueueMetrics workqueue.MetricsProvider
	// Options are the pools' options; zero fields take DefaultOptions'.
	Options Options
	Tenants *tenantns.Guard
	// Model is the current config; nil before the first.
	Model func() *config.Model
	// Place says where a member's command server comes from and sets its
	// paths, as for a lease's record.
	Place func(r *leasepod.Record, model *config.Model)
	// HostRoot is the Manager's: the lease paths' root where pods share
	// the host ("": the pod's own).
	HostRoot string
	// MaxLeaseTTL is the longest lease: a member's deadline covers it
	// beyond MemberMaxAge.
	MaxLeaseTTL time.Duration
	// Refused explains a member's create the API server refused, as a
	// lease's is, and says whether the namespace's quota refused it.
	Refused func(r leasepod.Record, err error) (why error, quotaFull bool)
	// Ready is told of a Ready member of pool d (its stream is opened
	// ahead of its claim), Gone of a member that left the pool; both may
	// be nil.
	Ready func(pod *corev1.Pod, d *Decl)
	Gone  func(uid types.UID)
}

// Metrics receives the pools' figures (the sandbox Manager's Metrics
// has them).
type Metrics interface {
	// SandboxPool sets company's warm pools: the members its config
	// declares, those that exist, and those of them Ready.
	SandboxPool(company string, declared, members, ready int)
	// SandboxPoolReady observes a warm pool member of company that took d
	// from its creationTimestamp to the daemon seeing it become Ready: the
	// pool's refill time.
	SandboxPoolReady(company string, d time.Duration)
	// SandboxPoolActing says whether this daemon's pool controller holds
	// its owner's Lease and keeps the pools (false: it stands by).
	SandboxPoolActing(acting bool)
}

// deps are Deps as the controller keeps them, its Options completed.
type deps struct {
	cs          kubernetes.Interface
	log         *slog.Logger
	metrics     Metrics
	opts        Options
	tenants     *tenantns.Guard
	model       func() *config.Model
	place       func(*leasepod.Record, *config.Model)
	hostRoot    string
	maxLeaseTTL time.Duration
	refused     func(leasepod.Record, error) (error, bool)
	ready       func(pod *corev1.Pod, d *Decl)
	gone        func(uid types.UID)
}

// poolConfig is a config and the pools it declares.
type poolConfig struct {
	model *config.Model
	pools map[Key]*Decl
}

// poolRateLimiter spaces the retries of a pool whose sync failed (its
// tenant not applied yet, the API server away): 50ms doubling to 30s, and
// at most 10 a second over all pools (a burst of 100).
func poolRateLimiter() workqueue.TypedRateLimiter[Key] {
	return workqueue.NewTypedMaxOfRateLimiter(
		workqueue.NewTypedItemExponentialFailureRateLimiter[Key](50*time.Millisecond, 30*time.Second),
		&workqueue.TypedBucketRateLimiter[Key]{Limiter: rate.NewLimiter(rate.Limit(10), 100)},
	)
}

// New returns the pools' controller of d, not started.
func New(dp Deps) *Controller {
	d := deps{cs: dp.Client, log: dp.Log, metrics: dp.Metrics, opts: dp.Options, tenants: dp.Tenants, model: dp.Model,
		place: dp.Place, hostRoot: dp.HostRoot, maxLeaseTTL: dp.MaxLeaseTTL, refused: dp.Refused, ready: dp.Ready, gone: dp.Gone}
	d.opts.complete()
	c := &Controller{deps: d, informer: dp.Pods, lister: corelisters.NewPodLister(dp.Pods.GetIndexer()), index: poolIndexPrefix + d.opts.Owner,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(poolRateLimiter(),
			workqueue.TypedRateLimitingQueueConfig[Key]{Name: "sandbox-pools", MetricsProvider: dp.QueueMetrics}),
		exp:      newExpectations(d.opts.PendingTTL, time.Now),
		holds:    &nsHolds{quotaBackoff: d.opts.QuotaBackoff, coldHold: d.opts.ColdHold},
		pushed:   make(chan struct{}, 1),
		reported: map[string]bool{}}
	return c
}

// isMember says pod is a member of one of the owner's pools.
func (c *Controller) isMember(pod *corev1.Pod) bool {
	_, member := pod.Labels[Label]
	return member && pod.Labels[LabelOwner] == c.opts.Owner
}

// memberIndex indexes the owner's members by their pool's key.
func (c *Controller) memberIndex(obj any) ([]string, error) {
	if p, ok := obj.(*corev1.Pod); ok && c.isMember(p) {
		k, _ := memberKey(p)
		return []string{k.String()}, nil
	}
	return nil, nil
}

// Start adds the owner's index and the controller's handler to the pod
// informer, waits for the handler to have seen every member (30s at
// most), and starts the config loop, the workers and the owner's
// election (the workers sync only while this controller holds the
// owner's Lease).
func (c *Controller) Start(ctx context.Context) error {
	run, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	if err := podinformer.AddIndexers(c.informer, cache.Indexers{c.index: c.memberIndex}); err != nil {
		c.Close()
		return err
	}
	reg, err := podinformer.Handle(ctx, c.informer, podinformer.Filter(c.isMember, cache.ResourceEventHandlerFuncs{
		AddFunc: c.added, UpdateFunc: c.updated, DeleteFunc: c.deleted,
	}), 30*time.Second)
	if err != nil {
		c.Close()
		return err
	}
	c.reg = reg
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

// Close stops the controller and releases the owner's Lease if it held
// it; the members stay for the next daemon, or the standby.
func (c *Controller) Close() {
	if c.reg != nil {
		_ = c.informer.RemoveEventHandler(c.reg)
	}
	c.cancel()
	c.queue.ShutDown()
	c.wg.Wait()
}

// next syncs the next pool of the queue; false once the queue shuts down.
// A sync that fails is retried with the queue's backoff.
func (c *Controller) next(ctx context.Context) bool {
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
func memberKey(obj any) (Key, bool) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return Key{}, false
	}
	return Key{Namespace: p.Namespace, Hash: p.Labels[Label]}, true
}

func (c *Controller) added(obj any) {
	if k, ok := memberKey(obj); ok {
		c.exp.created(k, obj.(*corev1.Pod).Name)
		c.seen(k, obj.(*corev1.Pod))
		c.queue.Add(k)
	}
}

// seen passes on a member of pool k that is Ready (and not claimed nor
// going) to ready, and one being deleted to gone.
func (c *Controller) seen(k Key, pod *corev1.Pod) {
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
func (c *Controller) updated(old, obj any) {
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
func (c *Controller) deleted(obj any) {
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

// Acquiring counts an acquire of namespace ns in flight (nsHolds); the
// last one's end requeues the namespace's pools.
func (c *Controller) Acquiring(ns string) func() {
	return c.holds.acquiring(ns, time.Now(), func() { c.enqueueNamespace(ns) })
}

// enqueueNamespace queues every declared pool of namespace ns.
func (c *Controller) enqueueNamespace(ns string) {
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
func (c *Controller) declared(k Key) *Decl {
	if cfg := c.cfg.Load(); cfg != nil {
		return cfg.pools[k]
	}
	return nil
}
