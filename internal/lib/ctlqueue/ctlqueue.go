// Package ctlqueue is the worker loop of a controller's workqueue, in
// client-go's shape, written once: take an item, sync it, forget it or,
// when its sync failed, queue it again after the queue's rate limit; and
// the workers' start and joined stop. It imports no package of pcsync's.
package ctlqueue

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"k8s.io/client-go/util/workqueue"
)

// Work syncs q's items until q shuts down: an item whose sync fails is
// passed to failed (with its error) and queued again after q's rate
// limit; one whose sync succeeds is forgotten by the rate limiter.
func Work[T comparable](ctx context.Context, q workqueue.TypedRateLimitingInterface[T],
	sync func(context.Context, T) error, failed func(T, error)) {
	for next(ctx, q, sync, failed) {
	}
}

// next syncs the next item; false once q shuts down.
func next[T comparable](ctx context.Context, q workqueue.TypedRateLimitingInterface[T],
	sync func(context.Context, T) error, failed func(T, error)) bool {
	item, quit := q.Get()
	if quit {
		return false
	}
	defer q.Done(item)
	if err := sync(ctx, item); err != nil {
		failed(item, err)
		q.AddRateLimited(item)
		return true
	}
	q.Forget(item)
	return true
}

// Run starts n workers of work, each restarted a second after it returns,
// until ctx ends; then it shuts q down, waits for the workers, calls stop
// (the controller's informers and handlers) and closes done.
func Run[T comparable](ctx context.Context, q workqueue.TypedRateLimitingInterface[T], n int,
	work func(context.Context), stop func(), done chan<- struct{}) {
	var workers sync.WaitGroup
	for range n {
		workers.Go(func() { wait.UntilWithContext(ctx, work, time.Second) })
	}
	go func() {
		defer close(done)
		<-ctx.Done()
		q.ShutDown()
		workers.Wait()
		stop()
	}()
}
