package sandbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/pcsync/pcsync/internal/agentpod"
)

// poolIndex indexes the members in the cache by their pool's key.
const poolIndex = "pool"

// warmPools keeps every declared warm pool at its count of members: it
// watches the members (pods labelled LabelPool and its own LabelPoolOwner,
// in every namespace), and on each change, and every Resync, creates the
// missing ones and deletes those whose pool is no longer declared (a
// company, its pool, or its image, spec or company changed), that ended,
// that were not Ready within ReadyDeadline, that are older than
// MemberMaxAge, or that are surplus. A restarted daemon's cache lists the
// members of the one before: it adopts them, and creates only what is
// missing. Members of another owner (another deployment of pcsync) it
// never sees.
type warmPools struct {
	m    *Manager
	inf  cache.SharedIndexInformer
	kick chan struct{}
	stop chan struct{}
	done chan struct{}
	once sync.Once

	mu sync.Mutex
	// taken are members being claimed or removed for room: no reconcile
	// counts them, no other claim takes them.
	taken map[string]bool
	// pending are members created and not yet in the cache, by name.
	pending map[string]pendingMember
	// pressure holds, per namespace, the time before which no member is
	// created there (a quota refusal).
	pressure map[string]time.Time
	// inflight counts, per namespace, the acquires in flight (most of them
	// starting a pod of their own once the members are claimed): their pods
	// and the refill's would compete for the node, so no member is created
	// there while any is, for at most ColdHold from inflightSince.
	inflight      map[string]int
	inflightSince map[string]time.Time
	// born are the members this daemon created and has not yet seen
	// Ready: when each create began.
	born map[string]time.Time
	// declared is the last reconcile's declared pools, by key (doctor, the
	// metrics).
	declared map[poolKey]*poolDecl
	// reported are the companies whose pools the metrics were last given
	// (reconcile's goroutine only).
	reported map[string]bool
}

// pendingMember is a member created and not yet seen in the cache.
type pendingMember struct {
	key poolKey
	at  time.Time
}

// startPools starts the warm pools' watch and controller. A daemon that
// cannot watch pods keeps no pool (and says so): leases start cold.
func (m *Manager) startPools(ctx context.Context) {
	if m.opts.Pool.Disabled {
		return
	}
	selector := agentpod.LabelManagedBy + "=" + agentpod.ManagedByValue + "," + LabelPool + "," + LabelPoolOwner + "=" + m.opts.Pool.Owner
	pods := m.cs.CoreV1().Pods(metav1.NamespaceAll)
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.LabelSelector = selector
			return pods.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = selector
			return pods.Watch(ctx, o)
		},
	}
	inf := cache.NewSharedIndexInformer(lw, &corev1.Pod{}, 0, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc, poolIndex: func(obj any) ([]string, error) {
		p, ok := obj.(*corev1.Pod)
		if !ok {
			return nil, nil
		}
		return []string{poolKey{Namespace: p.Namespace, Hash: p.Labels[LabelPool]}.String()}, nil
	}})
	p := &warmPools{m: m, inf: inf, kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}),
		taken: map[string]bool{}, pending: map[string]pendingMember{}, pressure: map[string]time.Time{}, inflight: map[string]int{}, inflightSince: map[string]time.Time{}, born: map[string]time.Time{}, reported: map[string]bool{}, declared: map[poolKey]*poolDecl{}}
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { p.poke() },
		UpdateFunc: func(_, obj any) { p.seen(obj); p.poke() },
		DeleteFunc: func(obj any) { p.forgetTaken(obj); p.poke() },
	})
	go inf.Run(p.stop)
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if !cache.WaitForCacheSync(sctx.Done(), inf.HasSynced) {
		close(p.stop)
		m.log.Warn("sandbox: no warm pools: the daemon cannot list and watch pods (cluster-wide get, list, watch on pods); leases start cold")
		return
	}
	m.pools = p
	go p.run()
}

// poke asks for a reconcile soon.
func (p *warmPools) poke() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// close stops the controller; the members stay for the next daemon.
func (p *warmPools) close() {
	p.once.Do(func() { close(p.stop) })
	<-p.done
}

func (p *warmPools) run() {
	defer close(p.done)
	t := time.NewTicker(p.m.opts.Pool.Resync)
	defer t.Stop()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-p.stop
		cancel()
	}()
	for {
		p.reconcile(ctx)
		select {
		case <-p.stop:
			return
		case <-p.kick:
		case <-t.C:
		}
	}
}

// reconcile makes the members what the config declares: see warmPools.
func (p *warmPools) reconcile(ctx context.Context) {
	model := p.m.model()
	if model == nil {
		return // no config yet: keep what is
	}
	desired := p.m.declaredPools(model)
	now := time.Now()
	live := map[poolKey][]*corev1.Pod{}
	for _, obj := range p.inf.GetStore().List() {
		pod := obj.(*corev1.Pod)
		p.mu.Lock()
		delete(p.pending, pod.Name)
		taken := p.taken[pod.Name]
		p.mu.Unlock()
		if taken || pod.DeletionTimestamp != nil {
			continue
		}
		k := poolKey{Namespace: pod.Namespace, Hash: pod.Labels[LabelPool]}
		if why := p.unfit(pod, desired[k] != nil, now); why != "" {
			p.remove(ctx, pod, why)
			continue
		}
		live[k] = append(live[k], pod)
	}
	p.mu.Lock()
	pending := map[poolKey]int{}
	for name, pm := range p.pending {
		if now.Sub(pm.at) > p.m.opts.Pool.PendingTTL {
			delete(p.pending, name)
			continue
		}
		pending[pm.key]++
	}
	p.declared = desired
	p.mu.Unlock()
	for k, d := range desired {
		members := live[k]
		switch n := len(members) + pending[k]; {
		case n > d.count:
			// Surplus (a lowered count): the least ready, newest first.
			slices.SortFunc(members, func(a, b *corev1.Pod) int {
				if ra, rb := agentpod.Ready(a), agentpod.Ready(b); ra != rb {
					if ra {
						return 1
					}
					return -1
				}
				return b.CreationTimestamp.Compare(a.CreationTimestamp.Time)
			})
			for _, pod := range members[:min(n-d.count, len(members))] {
				p.remove(ctx, pod, "its pool has more members than it declares")
			}
		case n < d.count:
			p.refill(ctx, d, d.count-n)
		}
	}
	p.report()
}

// unfit says why a member must go, or "" when it may stay.
func (p *warmPools) unfit(pod *corev1.Pod, declared bool, now time.Time) string {
	age := now.Sub(pod.CreationTimestamp.Time)
	switch {
	case !declared:
		return "its pool is no longer declared (the company, its pool, or the pod spec it makes changed)"
	case pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded:
		return "it ended (" + string(pod.Status.Phase) + ")"
	case !agentpod.Ready(pod) && age > p.m.opts.Pool.ReadyDeadline:
		return fmt.Sprintf("it was not Ready within %s: %s", p.m.opts.Pool.ReadyDeadline, agentpod.Reason(pod))
	case age > p.m.opts.Pool.MemberMaxAge:
		return fmt.Sprintf("it waited for a claim longer than %s", p.m.opts.Pool.MemberMaxAge)
	}
	return ""
}

// refill creates n members of pool d, one at a time, while its namespace
// is not held (held).
func (p *warmPools) refill(ctx context.Context, d *poolDecl, n int) {
	if p.held(d.key.Namespace, time.Now()) {
		return
	}
	model := p.m.model()
	if err := p.m.tenants.Check(ctx, d.key.Namespace, d.rec.Company); err != nil {
		if !errors.Is(err, context.Canceled) {
			p.m.log.Warn("sandbox: warm pool not refilled", slog.String("pool", d.key.String()), slog.Any("error", err))
		}
		return
	}
	for i := range n {
		if i > 0 && p.held(d.key.Namespace, time.Now()) {
			return
		}
		pod, r, err := p.m.buildMember(d, model, time.Now())
		if err != nil {
			p.m.log.Warn("sandbox: warm pool member not built", slog.String("pool", d.key.String()), slog.Any("error", err))
			return
		}
		began := time.Now()
		p.mu.Lock()
		p.pending[pod.Name] = pendingMember{key: d.key, at: began}
		p.born[pod.Name] = began
		p.mu.Unlock()
		_, err = p.m.cs.CoreV1().Pods(d.key.Namespace).Create(ctx, pod, metav1.CreateOptions{FieldManager: "pcsync"})
		if err != nil {
			p.mu.Lock()
			delete(p.pending, pod.Name)
			delete(p.born, pod.Name)
			if ue := (*UserError)(nil); errors.As(createError(r, err), &ue) && ue.Code == CodeQuotaFull {
				p.pressure[d.key.Namespace] = time.Now().Add(p.m.opts.Pool.QuotaBackoff)
			}
			p.mu.Unlock()
			if !errors.Is(err, context.Canceled) {
				p.m.log.Warn("sandbox: warm pool member not created", slog.String("pool", d.key.String()), slog.Any("error", createError(r, err)))
			}
			return
		}
		p.m.log.Debug("sandbox: warm pool member created", slog.String("pod", pod.Namespace+"/"+pod.Name),
			slog.String("image", r.Image), slog.Duration("took", time.Since(began).Round(time.Millisecond)))
	}
}

// held says no member may be created in namespace ns now: a quota
// refusal there is recent (QuotaBackoff), or acquires of ns are in flight
// and have been for less than ColdHold.
func (p *warmPools) held(ns string, now time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if now.Before(p.pressure[ns]) {
		return true
	}
	return p.inflight[ns] > 0 && now.Sub(p.inflightSince[ns]) < p.m.opts.Pool.ColdHold
}

// acquiring counts an acquire of namespace ns in flight until the
// returned func is called (once its pod runs, or it failed); the last
// one's end asks for a reconcile, which refills what the burst claimed. A
// claim is done in milliseconds; a cold start holds the refills until its
// pod runs.
func (p *warmPools) acquiring(ns string) func() {
	p.mu.Lock()
	if p.inflight[ns] == 0 {
		p.inflightSince[ns] = time.Now()
	}
	p.inflight[ns]++
	p.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			p.mu.Lock()
			p.inflight[ns]--
			last := p.inflight[ns] == 0
			if last {
				delete(p.inflight, ns)
				delete(p.inflightSince, ns)
			}
			p.mu.Unlock()
			if last {
				p.poke()
			}
		})
	}
}

// remove deletes a member (not waiting for it to be gone).
func (p *warmPools) remove(ctx context.Context, pod *corev1.Pod, why string) {
	p.m.log.Info("sandbox: warm pool member removed", slog.String("pod", pod.Namespace+"/"+pod.Name), slog.String("why", why))
	if err := p.m.deletePod(ctx, pod.Namespace, pod.Name, string(pod.UID)); err != nil && !errors.Is(err, context.Canceled) {
		p.m.log.Warn("sandbox: warm pool member not deleted", slog.String("pod", pod.Namespace+"/"+pod.Name), slog.Any("error", err))
	}
}

// seen observes a member this daemon created the first time the cache
// has it Ready: its refill time, from the create to then.
func (p *warmPools) seen(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok || !agentpod.Ready(pod) {
		return
	}
	p.mu.Lock()
	at, ok := p.born[pod.Name]
	delete(p.born, pod.Name)
	p.mu.Unlock()
	if ok {
		p.m.opts.Metrics.SandboxPoolReady(agentpod.CompanyOf(pod.Labels), time.Since(at))
	}
}

// forgetTaken drops a member that left the cache (claimed, or gone) from
// the taken ones.
func (p *warmPools) forgetTaken(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	p.mu.Lock()
	delete(p.taken, pod.Name)
	delete(p.born, pod.Name)
	p.mu.Unlock()
}
