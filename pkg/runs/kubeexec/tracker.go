package kubeexec

import (
	"context"
	"fmt"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/pcsync/pcsync/internal/lib/agentpod"
	"github.com/pcsync/pcsync/internal/lib/podinformer"
)

// Indexer names.
const (
	// byJob indexes events by the namespace/name of their Job.
	byJob = "job"
	// podsByJob indexes the daemon's shared pod informer by the
	// namespace/name of a pod's Job (a name of its own there).
	podsByJob = "kubeexec-job"
	// byAgent indexes Jobs by namespace/agent label (agentpod.AgentOf).
	byAgent = "agent"
)

// tracker holds the executor's watches: Jobs labelled
// app.kubernetes.io/managed-by=pcsync in every namespace and FailedCreate
// events of Jobs, and its handler on the daemon's pod informer (pcsync's
// pods, shared: podinformer). Informer callbacks wake the handle of the
// Job they concern; handles then read the caches. Nothing polls.
type tracker struct {
	// factories start the informers: Jobs by label, Events by field
	// selector.
	factories          []informers.SharedInformerFactory
	jobs, pods, events cache.SharedIndexInformer

	mu sync.Mutex
	// subs are the handles following a Job, by namespace/name.
	subs map[string]*handle
	// deleted holds the last state of Jobs whose deletion was seen while a
	// handle followed them.
	deleted map[string]*batchv1.Job
	// ended are Jobs whose runs this executor has seen end: they no longer
	// count against their agent's concurrency, whatever the cache says.
	ended map[string]bool
	// reserved are the Jobs of runs this executor started and still
	// follows; they count against concurrency before the cache has them.
	reserved map[string]agentKey
	// changed is closed and replaced whenever a Job is added, finishes or
	// is deleted, or a reservation is dropped: concurrency waiters then
	// count again.
	changed chan struct{}
}

// agentKey is a namespace and an agent name.
type agentKey struct{ namespace, agent string }

func jobKey(ns, name string) string { return ns + "/" + name }

// newTracker builds the Job and Event informers (not started) beside
// pods, the daemon's pod informer.
func newTracker(client kubernetes.Interface, pods cache.SharedIndexInformer) *tracker {
	t := &tracker{
		subs:     map[string]*handle{},
		deleted:  map[string]*batchv1.Job{},
		ended:    map[string]bool{},
		reserved: map[string]agentKey{},
		changed:  make(chan struct{}),
	}
	managed := labels.SelectorFromSet(labels.Set{agentpod.LabelManagedBy: agentpod.ManagedByValue}).String()
	f := informers.NewSharedInformerFactoryWithOptions(client, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = managed }))
	t.jobs = f.Batch().V1().Jobs().Informer()
	t.pods = pods
	ef := informers.NewSharedInformerFactoryWithOptions(client, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.AndSelectors(
				fields.OneTermEqualSelector("involvedObject.kind", "Job"),
				fields.OneTermEqualSelector("reason", "FailedCreate"),
			).String()
		}))
	t.events = ef.Core().V1().Events().Informer()
	t.factories = []informers.SharedInformerFactory{f, ef}
	t.slim()
	t.index()
	t.handle()
	return t
}

// slim sets the informers' transforms.
func (t *tracker) slim() {
	// The caches keep only what explain and adoption read: with a
	// thousand runs in flight, whole Jobs (their templates, managed
	// fields) would be most of the daemon's memory. The pod informer
	// slims its pods itself (podinformer.Slim).
	_ = t.jobs.SetTransform(slimJob)
	_ = t.events.SetTransform(func(obj any) (any, error) {
		if m, ok := obj.(metav1.Object); ok {
			m.SetManagedFields(nil)
		}
		return obj, nil
	})
}

// index adds the informers' indexes: Jobs by agent, events by Job. The
// pods' index is added when the tracker starts.
func (t *tracker) index() {
	_ = t.jobs.AddIndexers(cache.Indexers{byAgent: func(obj any) ([]string, error) {
		j, ok := obj.(*batchv1.Job)
		if !ok {
			return nil, nil
		}
		return []string{jobKey(j.Namespace, agentpod.AgentOf(j.Labels))}, nil
	}})
	_ = t.events.AddIndexers(cache.Indexers{byJob: func(obj any) ([]string, error) {
		e, ok := obj.(*corev1.Event)
		if !ok {
			return nil, nil
		}
		return []string{jobKey(e.InvolvedObject.Namespace, e.InvolvedObject.Name)}, nil
	}})
}

// handle wakes the runs whose Job, pod or FailedCreate event changed.
func (t *tracker) handle() {
	_, _ = t.jobs.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if j, ok := obj.(*batchv1.Job); ok {
				t.jobChanged(j, false)
			}
		},
		UpdateFunc: func(old, obj any) {
			if j, ok := obj.(*batchv1.Job); ok {
				o, _ := old.(*batchv1.Job)
				t.jobChanged(j, o != nil && jobFinished(o) != jobFinished(j))
			}
		},
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if j, ok := obj.(*batchv1.Job); ok {
				t.jobDeleted(j)
			}
		},
	})
	eventHandler := func(obj any) {
		if e, ok := obj.(*corev1.Event); ok {
			t.wake(jobKey(e.InvolvedObject.Namespace, e.InvolvedObject.Name))
		}
	}
	_, _ = t.events.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: eventHandler, UpdateFunc: func(_, obj any) { eventHandler(obj) },
	})
}

// start runs the Job and Event informers until ctx ends, registers the
// pods' index and handler (removed when ctx ends), and waits for the
// first lists and the handler's replay of the pods.
func (t *tracker) start(ctx context.Context, timeout time.Duration) error {
	for _, f := range t.factories {
		f.Start(ctx.Done())
	}
	if err := podinformer.AddIndexers(t.pods, cache.Indexers{podsByJob: podJobIndex}); err != nil {
		return err
	}
	sctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if !cache.WaitForCacheSync(sctx.Done(), t.jobs.HasSynced, t.events.HasSynced) {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("the Job and Event watches did not sync within %s (check RBAC: list/watch jobs and events cluster-wide)", timeout)
	}
	reg, err := podinformer.Handle(ctx, t.pods, cache.ResourceEventHandlerFuncs{
		AddFunc: t.podChanged, UpdateFunc: func(_, obj any) { t.podChanged(obj) }, DeleteFunc: t.podChanged,
	}, timeout)
	if err != nil {
		return err
	}
	context.AfterFunc(ctx, func() { _ = t.pods.RemoveEventHandler(reg) })
	return nil
}

// stop waits for the Job and Event watches to end, once start's context
// has ended.
func (t *tracker) stop() {
	for _, f := range t.factories {
		f.Shutdown()
	}
}

// podJobIndex indexes a pod by the namespace/name of its Job.
func podJobIndex(obj any) ([]string, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return nil, nil
	}
	if ref := metav1.GetControllerOf(p); ref != nil && ref.Kind == "Job" {
		return []string{jobKey(p.Namespace, ref.Name)}, nil
	}
	return nil, nil
}

// podChanged wakes the run of a pod's Job.
func (t *tracker) podChanged(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	if p, ok := obj.(*corev1.Pod); ok {
		if ref := metav1.GetControllerOf(p); ref != nil && ref.Kind == "Job" {
			t.wake(jobKey(p.Namespace, ref.Name))
		}
	}
}

func (t *tracker) jobChanged(j *batchv1.Job, finishedChanged bool) {
	k := jobKey(j.Namespace, j.Name)
	t.mu.Lock()
	h := t.subs[k]
	if finishedChanged {
		t.broadcastLocked()
	}
	t.mu.Unlock()
	if h != nil {
		h.wake()
	}
}

func (t *tracker) jobDeleted(j *batchv1.Job) {
	k := jobKey(j.Namespace, j.Name)
	t.mu.Lock()
	h := t.subs[k]
	if h != nil {
		t.deleted[k] = j
	}
	delete(t.ended, k)
	t.broadcastLocked()
	t.mu.Unlock()
	if h != nil {
		h.wake()
	}
}

func (t *tracker) wake(k string) {
	t.mu.Lock()
	h := t.subs[k]
	t.mu.Unlock()
	if h != nil {
		h.wake()
	}
}

func (t *tracker) broadcastLocked() {
	close(t.changed)
	t.changed = make(chan struct{})
}

// subscribe makes h the follower of its Job's events.
func (t *tracker) subscribe(h *handle) {
	t.mu.Lock()
	t.subs[h.key] = h
	delete(t.deleted, h.key)
	t.mu.Unlock()
	h.wake()
}

// unsubscribe forgets h; ended records that its run is over.
func (t *tracker) unsubscribe(h *handle, ended bool) {
	t.mu.Lock()
	if t.subs[h.key] == h {
		delete(t.subs, h.key)
	}
	delete(t.deleted, h.key)
	delete(t.reserved, h.key)
	if ended {
		t.ended[h.key] = true
	}
	t.broadcastLocked()
	t.mu.Unlock()
}

// sub returns the handle following the Job with that key, if any.
func (t *tracker) sub(key string) *handle {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.subs[key]
}

// deletedJob returns the last state of the Job if its deletion was seen.
func (t *tracker) deletedJob(key string) *batchv1.Job {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.deleted[key]
}

// job returns the cached Job.
func (t *tracker) job(ns, name string) *batchv1.Job {
	obj, ok, err := t.jobs.GetIndexer().GetByKey(jobKey(ns, name))
	if err != nil || !ok {
		return nil
	}
	j, _ := obj.(*batchv1.Job)
	return j
}

// pod returns the newest cached pod of a Job.
func (t *tracker) pod(key string) *corev1.Pod {
	objs, err := t.pods.GetIndexer().ByIndex(podsByJob, key)
	if err != nil {
		return nil
	}
	var newest *corev1.Pod
	for _, o := range objs {
		p, ok := o.(*corev1.Pod)
		if !ok {
			continue
		}
		if newest == nil || newest.CreationTimestamp.Before(&p.CreationTimestamp) ||
			newest.CreationTimestamp.Equal(&p.CreationTimestamp) && newest.Name < p.Name {
			newest = p
		}
	}
	return newest
}

// failedCreate returns the newest FailedCreate event of the Job with that
// UID.
func (t *tracker) failedCreate(key string, uid string) *corev1.Event {
	objs, err := t.events.GetIndexer().ByIndex(byJob, key)
	if err != nil {
		return nil
	}
	var newest *corev1.Event
	for _, o := range objs {
		e, ok := o.(*corev1.Event)
		if !ok || string(e.InvolvedObject.UID) != uid {
			continue
		}
		if newest == nil || eventTime(newest).Before(eventTime(e)) {
			newest = e
		}
	}
	return newest
}

func eventTime(e *corev1.Event) time.Time {
	if !e.LastTimestamp.IsZero() {
		return e.LastTimestamp.Time
	}
	if !e.EventTime.IsZero() {
		return e.EventTime.Time
	}
	return e.CreationTimestamp.Time
}

// occupied counts the runs of an agent that hold a slot in the cluster: Jobs
// being created, and cached Jobs that have not finished and whose runs this
// executor has not seen end; a Job reserved for the agent is counted once.
// It allocates nothing: every start of a burst counts (200 starts, 400 Jobs
// and reservations each). Callers hold t.mu.
func (t *tracker) occupiedLocked(k agentKey) int {
	n := 0
	for _, ak := range t.reserved {
		if ak == k {
			n++
		}
	}
	objs, _ := t.jobs.GetIndexer().ByIndex(byAgent, jobKey(k.namespace, agentpod.LabelValue(k.agent)))
	for _, o := range objs {
		j, ok := o.(*batchv1.Job)
		if !ok || j.DeletionTimestamp != nil || jobFinished(j) {
			continue
		}
		key := jobKey(j.Namespace, j.Name)
		if ak, mine := t.reserved[key]; (mine && ak == k) || t.ended[key] {
			continue
		}
		n++
	}
	return n
}

// occupied is occupiedLocked for callers that do not hold the lock.
func (t *tracker) occupied(k agentKey) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.occupiedLocked(k)
}

// reserve waits until the agent has a free slot by the cluster's count
// (limit minus the runs occupying it) and takes it for the Job key. A run
// started by an earlier daemon and not adopted yet thus holds its slot.
func (t *tracker) reserve(ctx context.Context, k agentKey, key string, limit int, onWait func(n int)) error {
	waited := false
	for {
		t.mu.Lock()
		n := t.occupiedLocked(k)
		if _, mine := t.reserved[key]; mine || n < limit {
			t.reserved[key] = k
			t.mu.Unlock()
			return nil
		}
		ch := t.changed
		t.mu.Unlock()
		if !waited && onWait != nil {
			onWait(n)
			waited = true
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// unreserve drops the reservation of a Job that was never created.
func (t *tracker) unreserve(key string) {
	t.mu.Lock()
	if _, ok := t.reserved[key]; ok {
		delete(t.reserved, key)
		t.broadcastLocked()
	}
	t.mu.Unlock()
}

// slimJob drops what the executor never reads from a cached Job: managed
// fields and the spec (the pod template is most of a Job).
func slimJob(obj any) (any, error) {
	j, ok := obj.(*batchv1.Job)
	if !ok {
		return obj, nil
	}
	j.ManagedFields = nil
	j.Spec = batchv1.JobSpec{}
	return j, nil
}
