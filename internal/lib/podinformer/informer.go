package podinformer

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/pcsync/pcsync/internal/lib/agentpod"
)

// Options configure an Informer. Zero fields, and negative durations,
// take DefaultOptions' values.
type Options struct {
	// SyncTimeout bounds Start's wait for the first list, and Handle's for
	// a handler's replay of the cache. Default 2m.
	SyncTimeout time.Duration
}

// DefaultOptions returns the informer's defaults.
func DefaultOptions() Options { return Options{SyncTimeout: 2 * time.Minute} }

func (o *Options) complete() {
	o.SyncTimeout = cmp.Or(max(o.SyncTimeout, 0), DefaultOptions().SyncTimeout)
}

// Selector is the label selector of the informer's pods.
func Selector() string {
	return labels.SelectorFromSet(labels.Set{agentpod.LabelManagedBy: agentpod.ManagedByValue}).String()
}

// Informer is the informer of pcsync's pods, cached slimmed (Slim) and
// indexed by namespace. Its consumers use it as a
// cache.SharedIndexInformer; Start and Stop are its owner's.
type Informer struct {
	cache.SharedIndexInformer
	opts Options
	stop context.CancelFunc
	done chan struct{}
}

// New returns the informer, not started.
func New(cs kubernetes.Interface, o Options) *Informer {
	o.complete()
	sel := Selector()
	inf := coreinformers.NewFilteredPodInformer(cs, metav1.NamespaceAll, 0,
		cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc},
		func(lo *metav1.ListOptions) { lo.LabelSelector = sel })
	_ = inf.SetTransform(Slim)
	return &Informer{SharedIndexInformer: inf, opts: o}
}

// Start runs the informer until ctx ends or Stop is called, and waits for
// its first list (SyncTimeout at most). It runs once: a second Start is
// an error.
func (i *Informer) Start(ctx context.Context) error {
	if i.done != nil {
		return errors.New("pod informer: started twice")
	}
	run, stop := context.WithCancel(ctx)
	i.stop, i.done = stop, make(chan struct{})
	go func() {
		defer close(i.done)
		i.RunWithContext(run)
	}()
	sctx, cancel := context.WithTimeout(run, i.opts.SyncTimeout)
	defer cancel()
	if !cache.WaitForCacheSync(sctx.Done(), i.HasSynced) {
		if ctx.Err() != nil {
			return fmt.Errorf("pod informer: %w", ctx.Err())
		}
		return fmt.Errorf("pod informer: pods labelled %s not listed within %s (check RBAC: list and watch pods cluster-wide)",
			Selector(), i.opts.SyncTimeout)
	}
	return nil
}

// Stop ends the informer and waits for its goroutine; it does nothing
// before Start.
func (i *Informer) Stop() {
	if i.done == nil {
		return
	}
	i.stop()
	<-i.done
}

// Handle registers h on inf and waits (timeout at most) until h has been
// given every pod the cache held when it registered: a consumer that acts
// on its own state after Handle has seen the cluster's. On an error the
// handler is removed again. The consumer removes it
// (inf.RemoveEventHandler) when it stops.
func Handle(ctx context.Context, inf cache.SharedIndexInformer, h cache.ResourceEventHandler, timeout time.Duration) (cache.ResourceEventHandlerRegistration, error) {
	reg, err := inf.AddEventHandler(h)
	if err != nil {
		return nil, fmt.Errorf("pod informer: add handler: %w", err)
	}
	sctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if !cache.WaitForCacheSync(sctx.Done(), reg.HasSynced) {
		_ = inf.RemoveEventHandler(reg)
		if ctx.Err() != nil {
			return nil, fmt.Errorf("pod informer: %w", ctx.Err())
		}
		return nil, fmt.Errorf("pod informer: pods not listed within %s (check RBAC: list and watch pods cluster-wide)", timeout)
	}
	return reg, nil
}

// AddIndexers adds to inf those of ix whose names it has not yet: a
// consumer made again (a new leadership term) finds its indexes there.
func AddIndexers(inf cache.SharedIndexInformer, ix cache.Indexers) error {
	have := inf.GetIndexer().GetIndexers()
	missing := cache.Indexers{}
	for name, f := range ix {
		if _, ok := have[name]; !ok {
			missing[name] = f
		}
	}
	if len(missing) == 0 {
		return nil
	}
	if err := inf.AddIndexers(missing); err != nil {
		return fmt.Errorf("pod informer: %w", err)
	}
	return nil
}

// Filter is a handler that passes h only the pods keep returns true for,
// as client-go's FilteringResourceEventHandler does (a pod that starts or
// stops matching is added or deleted), keep seeing a deleted pod's last
// state rather than its tombstone.
func Filter(keep func(*corev1.Pod) bool, h cache.ResourceEventHandler) cache.ResourceEventHandler {
	return cache.FilteringResourceEventHandler{Handler: h, FilterFunc: func(obj any) bool {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		p, ok := obj.(*corev1.Pod)
		return ok && keep(p)
	}}
}
