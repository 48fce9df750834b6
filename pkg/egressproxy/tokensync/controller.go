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
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/pcsync/pcsync/internal/lib/agentpod"
	"github.com/pcsync/pcsync/pkg/egressproxy/inject"
)

// Options tune a Controller.
type Options struct {
	// Workers sync namespaces at once. Default 2.
	Workers int
	Logger  *slog.Logger
	// QueueMetrics receives the controller's workqueue metrics (queue
	// "tokensync"); nil: none.
	QueueMetrics workqueue.MetricsProvider
}

// DefaultOptions returns the options used for zero fields.
func DefaultOptions() Options { return Options{Workers: 2, Logger: slog.Default()} }

func (o *Options) complete() {
	d := DefaultOptions()
	o.Workers = cmp.Or(max(o.Workers, 0), d.Workers)
	o.Logger = cmp.Or(o.Logger, d.Logger)
}

// Controller keeps the proxies' token annotations in step with the runs.
type Controller struct {
	cs       kubernetes.Interface
	opts     Options
	informer cache.SharedIndexInformer
	pods     corelisters.PodLister
	queue    workqueue.TypedRateLimitingInterface[string]
}

// New returns the controller of every namespace's agent and proxy pods.
func New(cs kubernetes.Interface, opts Options) *Controller {
	opts.complete()
	sel := labels.NewSelector()
	req, _ := labels.NewRequirement(agentpod.LabelRole, selection.In, []string{agentpod.RoleAgent, agentpod.RoleEgressProxy})
	sel = sel.Add(*req)
	f := informers.NewSharedInformerFactoryWithOptions(cs, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = sel.String() }))
	pi := f.Core().V1().Pods()
	// With a thousand runs in flight, whole pods (specs, managed fields)
	// would be most of the daemon's memory.
	_ = pi.Informer().SetTransform(slimPod)
	c := &Controller{cs: cs, opts: opts, informer: pi.Informer(), pods: pi.Lister(),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "tokensync", MetricsProvider: opts.QueueMetrics})}
	_, _ = c.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueue,
		UpdateFunc: func(old, cur any) { c.enqueueChanged(old, cur) },
		DeleteFunc: c.enqueue,
	})
	return c
}

// Run syncs until ctx ends; it returns once the pods are listed, with the
// workers running in the background.
func (c *Controller) Run(ctx context.Context) error {
	go c.informer.Run(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), c.informer.HasSynced) {
		return fmt.Errorf("credential tokens: pods not listed: %w", context.Cause(ctx))
	}
	for range c.opts.Workers {
		go wait.UntilWithContext(ctx, c.work, time.Second)
	}
	go func() { <-ctx.Done(); c.queue.ShutDown() }()
	return nil
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
	if err := c.sync(ctx, ns); err != nil {
		c.opts.Logger.Warn("credential tokens: sync failed", "namespace", ns, "error", err)
		c.queue.AddRateLimited(ns)
		return true
	}
	c.queue.Forget(ns)
	return true
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
	pods, err := c.pods.Pods(ns).List(labels.Everything())
	if err != nil {
		return err
	}
	want := map[string]string{}
	for _, p := range pods {
		if h := p.Annotations[agentpod.AnnotationTokenHash]; len(h) == 64 && !isProxy(p) && !ended(p) {
			want[inject.AnnotationKey(h)] = strings.TrimSpace(h + " " + p.Status.PodIP)
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
		if _, ok := want[k]; !ok && strings.HasPrefix(k, inject.AnnotationTokenPrefix) {
			patch[k] = nil
		}
	}
	return patch
}

// slimPod keeps of a pod what the controller reads: its name, namespace,
// labels, annotations and deletion, its phase and IP.
func slimPod(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, UID: p.UID, ResourceVersion: p.ResourceVersion,
			Labels: p.Labels, Annotations: p.Annotations, DeletionTimestamp: p.DeletionTimestamp},
		Status: corev1.PodStatus{Phase: p.Status.Phase, PodIP: p.Status.PodIP},
	}, nil
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
		if strings.HasPrefix(k, inject.AnnotationTokenPrefix) {
			b.WriteString(k + "=" + p.Annotations[k] + ";")
		}
	}
	return b.String()
}
