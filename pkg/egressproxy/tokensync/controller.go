package tokensync

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/pcsync/pcsync/internal/lib/agentpod"
	"github.com/pcsync/pcsync/internal/lib/ctlqueue"
	"github.com/pcsync/pcsync/internal/lib/podinformer"
	"github.com/pcsync/pcsync/pkg/egressproxy/inject"
	"github.com/pcsync/pcsync/pkg/egressproxy/spend"
)

// Options tune a Controller.
type Options struct {
	// Workers sync namespaces at once. Default 2.
	Workers int
	Logger  *slog.Logger
	// QueueMetrics receives the controller's workqueue metrics (queue
	// "tokensync"); nil: none.
	QueueMetrics workqueue.MetricsProvider
	// Pods is the daemon's informer of pcsync's pods (podinformer), which
	// the controller shares with the daemon's other controllers: it
	// registers its handler on Run and removes it when Run's context ends.
	// Nil: an informer of the controller's own, run by Run.
	Pods cache.SharedIndexInformer
	// SyncTimeout bounds Run's wait for the pods. Default 2m.
	SyncTimeout time.Duration
}

// DefaultOptions returns the options used for zero fields.
func DefaultOptions() Options {
	return Options{Workers: 2, Logger: slog.Default(), SyncTimeout: 2 * time.Minute}
}

func (o *Options) complete() {
	d := DefaultOptions()
	o.Workers = cmp.Or(max(o.Workers, 0), d.Workers)
	o.Logger = cmp.Or(o.Logger, d.Logger)
	o.SyncTimeout = cmp.Or(max(o.SyncTimeout, 0), d.SyncTimeout)
}

// Controller keeps the proxies' token annotations in step with the runs.
type Controller struct {
	cs       kubernetes.Interface
	opts     Options
	informer cache.SharedIndexInformer
	// own is the informer when it is the controller's (Options.Pods nil).
	own   *podinformer.Informer
	pods  corelisters.PodLister
	queue workqueue.TypedRateLimitingInterface[string]
	// done is closed once Run's work has ended (see Wait).
	done chan struct{}
}

// selector is the controller's pods: agents' and proxies'.
var selector = func() labels.Selector {
	req, _ := labels.NewRequirement(agentpod.LabelRole, selection.In, []string{agentpod.RoleAgent, agentpod.RoleEgressProxy})
	return labels.NewSelector().Add(*req)
}()

// New returns the controller of every namespace's agent and proxy pods
// (pcsync's pods of those roles).
func New(cs kubernetes.Interface, opts Options) *Controller {
	opts.complete()
	c := &Controller{cs: cs, opts: opts, informer: opts.Pods,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "tokensync", MetricsProvider: opts.QueueMetrics})}
	if c.informer == nil {
		c.own = podinformer.New(cs, podinformer.Options{SyncTimeout: opts.SyncTimeout})
		c.informer = c.own
	}
	c.pods = corelisters.NewPodLister(c.informer.GetIndexer())
	return c
}

// Run syncs until ctx ends; it returns once its handler has seen the
// pods, with the workers running in the background. It runs the informer
// when it is the controller's own.
func (c *Controller) Run(ctx context.Context) error {
	c.done = make(chan struct{})
	if c.own != nil {
		if err := c.own.Start(ctx); err != nil {
			c.own.Stop()
			close(c.done)
			return fmt.Errorf("credential tokens: %w", err)
		}
	}
	reg, err := podinformer.Handle(ctx, c.informer, podinformer.Filter(isMine, cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueue,
		UpdateFunc: func(old, cur any) { c.enqueueChanged(old, cur) },
		DeleteFunc: c.enqueue,
	}), c.opts.SyncTimeout)
	if err != nil {
		if c.own != nil {
			c.own.Stop()
		}
		close(c.done)
		return fmt.Errorf("credential tokens: %w", err)
	}
	ctlqueue.Run(ctx, c.queue, c.opts.Workers, c.work, func() {
		_ = c.informer.RemoveEventHandler(reg)
		if c.own != nil {
			c.own.Stop()
		}
	}, c.done)
	return nil
}

// Wait returns once the controller has stopped after Run's context ended:
// its workers returned, its handler removed, its own informer (if any)
// stopped. After a Run that failed it returns at once; call it only after
// Run has returned.
func (c *Controller) Wait() {
	if c.done != nil {
		<-c.done
	}
}

// isMine says pod is an agent's or a proxy's.
func isMine(pod *corev1.Pod) bool { return selector.Matches(labels.Set(pod.Labels)) }

func (c *Controller) work(ctx context.Context) {
	ctlqueue.Work(ctx, c.queue, c.sync, func(ns string, err error) {
		c.opts.Logger.Warn("credential tokens: sync failed", "namespace", ns, "error", err)
	})
}

// enqueue queues the namespace of a pod that carries a token or is a
// proxy.
func (c *Controller) enqueue(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	if pod, ok := obj.(*corev1.Pod); ok && (pod.Annotations[agentpod.AnnotationTokenHash] != "" || isProxy(pod)) {
		c.queue.Add(pod.Namespace)
	}
}

// enqueueChanged queues a pod whose token, IP, end or proxy annotations
// changed.
func (c *Controller) enqueueChanged(old, cur any) {
	o, ok1 := old.(*corev1.Pod)
	n, ok2 := cur.(*corev1.Pod)
	if !ok1 || !ok2 {
		return
	}
	if o.Annotations[agentpod.AnnotationTokenHash] != n.Annotations[agentpod.AnnotationTokenHash] || o.Status.PodIP != n.Status.PodIP ||
		ended(o) != ended(n) || (isProxy(n) && tokenAnnotations(o) != tokenAnnotations(n)) {
		c.enqueue(n)
	}
}

// sync sets the live tokens of ns on each of its proxy pods.
func (c *Controller) sync(ctx context.Context, ns string) error {
	pods, err := c.pods.Pods(ns).List(selector)
	if err != nil {
		return err
	}
	want := map[string]string{}
	for _, p := range pods {
		if h := p.Annotations[agentpod.AnnotationTokenHash]; len(h) == 64 && !isProxy(p) && !ended(p) {
			want[inject.AnnotationKey(h)] = strings.TrimSpace(h + " " + p.Status.PodIP)
			if agent := agentpod.AgentOf(p.Labels); agent != "" {
				// Whose spend the run's answers are (package spend).
				want[spend.AnnotationAgentPrefix+h[:40]] = agent
			}
		}
	}
	for _, p := range pods {
		if !isProxy(p) || p.DeletionTimestamp != nil {
			continue
		}
		patch := diff(p.Annotations, want)
		if len(patch) == 0 {
			continue
		}
		body, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": patch}})
		if _, err := c.cs.CoreV1().Pods(ns).Patch(ctx, p.Name, types.MergePatchType, body, metav1.PatchOptions{FieldManager: "pcsync-tokensync"}); err != nil {
			return fmt.Errorf("Pod/%s/%s: token annotations: %w", ns, p.Name, err)
		}
	}
	return nil
}

// diff is the merge patch of annotations that makes have's token
// annotations want's: changed and new values, and null for the gone.
func diff(have, want map[string]string) map[string]any {
	patch := map[string]any{}
	for k, v := range want {
		if have[k] != v {
			patch[k] = v
		}
	}
	for k := range have {
		if _, ok := want[k]; !ok && ours(k) {
			patch[k] = nil
		}
	}
	return patch
}

// ours tells whether a proxy pod's annotation is one this controller
// keeps: a live run's token, or its agent.
func ours(k string) bool {
	return strings.HasPrefix(k, inject.AnnotationTokenPrefix) || strings.HasPrefix(k, spend.AnnotationAgentPrefix)
}

func isProxy(p *corev1.Pod) bool { return p.Labels[agentpod.LabelRole] == agentpod.RoleEgressProxy }

// ended reports whether a run pod is over: deleting, or its phase final.
func ended(p *corev1.Pod) bool {
	return p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

// tokenAnnotations is a proxy pod's token annotations, as one comparable
// string.
func tokenAnnotations(p *corev1.Pod) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(p.Annotations)) {
		if ours(k) {
			b.WriteString(k + "=" + p.Annotations[k] + ";")
		}
	}
	return b.String()
}
