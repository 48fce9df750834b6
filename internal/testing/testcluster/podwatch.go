package testcluster

import (
	"context"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// PodWatch keeps the last state of every pod a watch saw (a pod's last
// state before its deletion included), for a test that checks where the
// pods of a run or a lease ran after they are gone.
type PodWatch struct {
	mu   sync.Mutex
	pods map[string]*corev1.Pod
}

// WatchPods watches the pods of namespace ns (which need not exist yet)
// that match the label selector, until t ends.
func (c *Cluster) WatchPods(t testing.TB, ns, selector string) *PodWatch {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	w, err := c.Client().CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatalf("watch the pods of %s (%s): %v", ns, selector, err)
	}
	pw := &PodWatch{pods: map[string]*corev1.Pod{}}
	go func() {
		for ev := range w.ResultChan() {
			if p, ok := ev.Object.(*corev1.Pod); ok && ev.Type != watch.Deleted {
				pw.mu.Lock()
				pw.pods[p.Name] = p
				pw.mu.Unlock()
			}
		}
	}()
	return pw
}

// All returns the last state of each pod seen.
func (pw *PodWatch) All() []*corev1.Pod {
	pw.mu.Lock()
	defer pw.mu.Unlock()
	out := make([]*corev1.Pod, 0, len(pw.pods))
	for _, p := range pw.pods {
		out = append(out, p)
	}
	return out
}
