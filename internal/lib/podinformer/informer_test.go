package podinformer

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"

	"github.com/pcsync/pcsync/internal/lib/agentpod"
)

func pod(name string, labels map[string]string) *corev1.Pod {
	l := map[string]string{agentpod.LabelManagedBy: agentpod.ManagedByValue}
	for k, v := range labels {
		l[k] = v
	}
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", Labels: l}}
}

// events records what a handler was told, by pod name.
type events struct {
	mu  sync.Mutex
	got []string
}

func (e *events) add(what string) func(obj any) {
	return func(obj any) {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		e.mu.Lock()
		defer e.mu.Unlock()
		e.got = append(e.got, what+" "+obj.(*corev1.Pod).Name)
	}
}

func (e *events) list() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.got...)
}

// TestHandleOnARunningInformer: a consumer registered on the running
// informer sees, once Handle returns, every pod of its filter that was
// there (only pcsync's pods are in the informer); a pod that leaves its
// filter is deleted for it; its index is added once however often it
// comes back; Stop joins the informer.
func TestHandleOnARunningInformer(t *testing.T) {
	mine := map[string]string{"role": "mine"}
	foreign := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "foreign", Namespace: "ns", Labels: mine}}
	cs := fake.NewClientset(pod("a", mine), pod("b", nil), foreign)
	inf := New(cs, DefaultOptions())
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	if err := inf.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := inf.Start(ctx); err == nil {
		t.Error("a second Start: no error")
	}
	var e events
	keep := func(p *corev1.Pod) bool { return p.Labels["role"] == "mine" }
	reg, err := Handle(ctx, inf, Filter(keep, cache.ResourceEventHandlerFuncs{
		AddFunc: e.add("add"), UpdateFunc: func(_, o any) { e.add("update")(o) }, DeleteFunc: e.add("delete"),
	}), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"add a"}, e.list()); diff != "" {
		t.Errorf("after Handle (-want +got):\n%s", diff)
	}
	ix := cache.Indexers{"by-role": func(obj any) ([]string, error) { return []string{obj.(*corev1.Pod).Labels["role"]}, nil }}
	for range 2 {
		if err := AddIndexers(inf, ix); err != nil {
			t.Fatal(err)
		}
	}
	if objs, _ := inf.GetIndexer().ByIndex("by-role", "mine"); len(objs) != 1 {
		t.Errorf("indexed as mine: %d pods, want 1", len(objs))
	}
	if _, err := cs.CoreV1().Pods("ns").Update(ctx, pod("a", nil), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(e.list()) < 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if diff := cmp.Diff([]string{"add a", "delete a"}, e.list()); diff != "" {
		t.Errorf("after a's label went (-want +got):\n%s", diff)
	}
	if err := inf.RemoveEventHandler(reg); err != nil {
		t.Fatal(err)
	}
	inf.Stop()
	if !inf.IsStopped() {
		t.Error("the informer runs after Stop")
	}
}
