package spendkeep

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/pcsync/pcsync/internal/lib/agentpod"
	"github.com/pcsync/pcsync/internal/lib/podinformer"
	"github.com/pcsync/pcsync/pkg/health"
)

// AnnotationRecord is the proxy Deployment's annotation that keeps the
// tenant's spend.Record.
const AnnotationRecord = "spend.pcsync.io/record"

// DeploymentName is the tenant's proxy Deployment (render's
// EgressProxyName).
const DeploymentName = "paperclip-egress-proxy"

// fieldManager writes the record and the bases.
const fieldManager = "pcsync-spend"

// Options tune a Keeper.
type Options struct {
	// Interval between pulls. Default 5s: what a proxy that dies
	// unwarned may have counted and lost.
	Interval time.Duration
	// Port is the proxies' metrics port. Default 9090
	// (render.EgressProxyMetricsPort).
	Port int
	// Client pulls the reports. Default: a client with a 2 s timeout.
	Client *http.Client
	Logger *slog.Logger
	// Pods is the daemon's informer of pcsync's pods (podinformer);
	// nil: one of the Keeper's own, run by Run.
	Pods cache.SharedIndexInformer
	// SyncTimeout bounds Run's wait for the pods. Default 2m.
	SyncTimeout time.Duration
	// Health, when set, gets the gating condition CondSpendKept after
	// each pass: false, with the failure, while a tenant's fails.
	Health *health.Checker
}

// CondSpendKept is the daemon's condition of the Keeper's passes.
const CondSpendKept = "ProxySpendKept"

// DefaultOptions returns the options used for zero fields.
func DefaultOptions() Options {
	return Options{Interval: 5 * time.Second, Port: 9090, Client: &http.Client{Timeout: 2 * time.Second},
		Logger: slog.Default(), SyncTimeout: 2 * time.Minute}
}

func (o *Options) complete() {
	d := DefaultOptions()
	o.Interval = cmp.Or(max(o.Interval, 0), d.Interval)
	o.Port = cmp.Or(o.Port, d.Port)
	o.Client = cmp.Or(o.Client, d.Client)
	o.Logger = cmp.Or(o.Logger, d.Logger)
	o.SyncTimeout = cmp.Or(max(o.SyncTimeout, 0), d.SyncTimeout)
}

// Keeper keeps the proxies' spend in their Deployments.
type Keeper struct {
	cs       kubernetes.Interface
	opts     Options
	informer cache.SharedIndexInformer
	own      *podinformer.Informer
	pods     corelisters.PodLister

	mu sync.Mutex
	// gone are the namespaces where a proxy pod went since the last pass.
	gone map[string]bool
	// errs are the last pass's failures, by namespace.
	errs map[string]error
	// kick asks for a pass now.
	kick chan struct{}
	done chan struct{}
}

// retry has the next pass read ns's record, pods or not.
func (k *Keeper) retry(ns string) {
	k.mu.Lock()
	k.gone[ns] = true
	k.mu.Unlock()
}

// kickNS asks for a pass of ns now.
func (k *Keeper) kickNS(ns string) {
	k.retry(ns)
	select {
	case k.kick <- struct{}{}:
	default:
	}
}

// New returns the Keeper of every tenant's proxy.
func New(cs kubernetes.Interface, opts Options) *Keeper {
	opts.complete()
	k := &Keeper{cs: cs, opts: opts, informer: opts.Pods, gone: map[string]bool{}, errs: map[string]error{}, kick: make(chan struct{}, 1)}
	if k.informer == nil {
		k.own = podinformer.New(cs, podinformer.Options{SyncTimeout: opts.SyncTimeout})
		k.informer = k.own
	}
	k.pods = corelisters.NewPodLister(k.informer.GetIndexer())
	return k
}

// Run pulls every Interval until ctx ends, in the background; it returns
// once the pods are seen.
func (k *Keeper) Run(ctx context.Context) error {
	k.done = make(chan struct{})
	if k.own != nil {
		if err := k.own.Start(ctx); err != nil {
			k.own.Stop()
			close(k.done)
			return fmt.Errorf("spend keeper: %w", err)
		}
	}
	reg, err := podinformer.Handle(ctx, k.informer, podinformer.Filter(isProxy, cache.ResourceEventHandlerFuncs{
		// A stopping proxy is pulled at once: it serves /spend until it
		// has been (spend.Gate.AwaitPull).
		UpdateFunc: func(old, cur any) {
			if o, n := old.(*corev1.Pod), cur.(*corev1.Pod); o.DeletionTimestamp == nil && n.DeletionTimestamp != nil {
				k.kickNS(n.Namespace)
			}
		},
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if p, ok := obj.(*corev1.Pod); ok {
				k.kickNS(p.Namespace)
			}
		},
	}), k.opts.SyncTimeout)
	if err != nil {
		if k.own != nil {
			k.own.Stop()
		}
		close(k.done)
		return fmt.Errorf("spend keeper: %w", err)
	}
	go func() {
		defer close(k.done)
		t := time.NewTicker(k.opts.Interval)
		defer t.Stop()
		for {
			k.Pass(ctx)
			select {
			case <-k.kick:
			case <-ctx.Done():
				_ = k.informer.RemoveEventHandler(reg)
				if k.own != nil {
					k.own.Stop()
				}
				return
			case <-t.C:
			}
		}
	}()
	return nil
}

// Wait returns once Run's loop has ended; call it only after Run.
func (k *Keeper) Wait() {
	if k.done != nil {
		<-k.done
	}
}

// Err is the last pass's failures, one per tenant; nil when none.
func (k *Keeper) Err() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	for ns, err := range k.errs {
		return fmt.Errorf("spend keeper: %d tenants failed, e.g. %s: %w", len(k.errs), ns, err)
	}
	return nil
}

// Pass keeps every tenant's spend once: those with a proxy pod, and
// those where one went or is stopping.
func (k *Keeper) Pass(ctx context.Context) {
	pods, err := k.pods.List(labels.SelectorFromSet(labels.Set{agentpod.LabelRole: agentpod.RoleEgressProxy}))
	k.mu.Lock()
	nss := k.gone
	k.gone = map[string]bool{}
	k.mu.Unlock()
	if err != nil {
		return
	}
	// Each tenant with a proxy pod, and each where one went (true: its
	// record is read even when no proxy answers).
	all := maps.Clone(nss)
	for _, p := range pods {
		if _, ok := all[p.Namespace]; !ok {
			all[p.Namespace] = false
		}
	}
	errs := map[string]error{}
	for ns, gone := range all {
		if ctx.Err() != nil {
			return
		}
		if err := k.sync(ctx, ns, gone); err != nil {
			errs[ns] = err
			k.opts.Logger.Warn("spend keeper: pass failed", "namespace", ns, "error", err)
		}
	}
	k.mu.Lock()
	k.errs = errs
	k.mu.Unlock()
	for ns := range errs {
		k.retry(ns)
	}
	if h := k.opts.Health; h != nil {
		if err := k.Err(); err != nil {
			h.Set(CondSpendKept, false, true, "PassFailed", err.Error())
		} else {
			h.Set(CondSpendKept, true, true, "Kept", "every proxy's spend is kept on its Deployment")
		}
	}
}

func isProxy(p *corev1.Pod) bool { return p.Labels[agentpod.LabelRole] == agentpod.RoleEgressProxy }
