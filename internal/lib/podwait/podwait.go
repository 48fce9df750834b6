// Package podwait waits on one pod until a condition holds, once, on
// client-go's watch.UntilWithSync: a list of the pod by name, then a watch
// that an informer keeps going (it lists again when a watch closes or
// expires), so a caller never writes its own watch loop. The pod's watch
// needs get, list and watch on pods.
package podwait

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
)

// Cond says whether the wait for a pod is over: done, or an error that ends
// it. pod is nil while the API server has no such pod (it is gone, or not
// yet made).
type Cond func(pod *corev1.Pod) (done bool, err error)

// Until waits until cond holds for pod ns/name and returns the pod as last
// seen (nil when never seen, or gone). When ctx ends first, the error wraps
// context.Cause(ctx); an error of cond is returned as it is.
func Until(ctx context.Context, cs kubernetes.Interface, ns, name string, cond Cond) (*corev1.Pod, error) {
	var last *corev1.Pod
	check := func(obj any, exists bool) (bool, error) {
		if !exists {
			return cond(nil)
		}
		p, ok := obj.(*corev1.Pod)
		if !ok {
			return false, nil
		}
		last = p
		return cond(p)
	}
	_, err := watchtools.UntilWithSync(ctx, listWatch(cs, ns, name), &corev1.Pod{},
		func(store cache.Store) (bool, error) {
			obj, exists, err := store.GetByKey(ns + "/" + name)
			if err != nil {
				return false, err
			}
			return check(obj, exists)
		},
		func(ev watch.Event) (bool, error) {
			switch ev.Type {
			case watch.Deleted:
				return check(nil, false)
			case watch.Added, watch.Modified:
				return check(ev.Object, true)
			}
			return false, nil
		})
	if err != nil && ctx.Err() != nil {
		return last, fmt.Errorf("Pod/%s/%s: %w", ns, name, context.Cause(ctx))
	}
	return last, err
}

// Gone returns once the API server no longer has pod ns/name.
func Gone(ctx context.Context, cs kubernetes.Interface, ns, name string) error {
	_, err := Until(ctx, cs, ns, name, func(p *corev1.Pod) (bool, error) { return p == nil, nil })
	if err != nil && ctx.Err() != nil {
		return fmt.Errorf("Pod/%s/%s still there: %w", ns, name, context.Cause(ctx))
	}
	return err
}

// listWatch lists and watches the one pod ns/name. Its list is a
// consistent read: a reflector lists at resourceVersion "0", which the API
// server may answer from a watch cache that does not yet hold a pod just
// created, and a pod missing from the first list reads as deleted. (Under
// a burst of 20 lease creates on the real node, three acquires failed so,
// "deleted before it was ready", and then deleted their own pods.)
func listWatch(cs kubernetes.Interface, ns, name string) cache.ListerWatcher {
	byName := fields.OneTermEqualSelector("metadata.name", name).String()
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = byName
			o.ResourceVersion, o.ResourceVersionMatch = "", ""
			return cs.CoreV1().Pods(ns).List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = byName
			return cs.CoreV1().Pods(ns).Watch(ctx, o)
		},
	}
}
