package ctlqueue

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/client-go/util/workqueue"
)

// TestWork: each item is synced; one that fails is reported and synced
// again (the rate limiter counts its retries until it succeeds, then
// forgets it); Work returns once the queue shuts down.
func TestWork(t *testing.T) {
	q := workqueue.NewTypedRateLimitingQueue(workqueue.NewTypedItemExponentialFailureRateLimiter[string](0, 0))
	q.Add("a")
	q.Add("b")
	var synced, failed []string
	fails := 2
	sync := func(_ context.Context, item string) error {
		synced = append(synced, item)
		if item == "b" && fails > 0 {
			fails--
			return errors.New("not yet")
		}
		if len(synced) == 4 {
			if q.NumRequeues("b") != 2 {
				t.Errorf("b's retries: %d, want 2 before its success", q.NumRequeues("b"))
			}
			go q.ShutDownWithDrain()
		}
		return nil
	}
	Work(context.Background(), q, sync, func(item string, err error) { failed = append(failed, item+": "+err.Error()) })
	if diff := cmp.Diff([]string{"a", "b", "b", "b"}, synced); diff != "" {
		t.Errorf("synced (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"b: not yet", "b: not yet"}, failed); diff != "" {
		t.Errorf("failed (-want +got):\n%s", diff)
	}
	if q.NumRequeues("b") != 0 {
		t.Errorf("b not forgotten after its success: %d retries", q.NumRequeues("b"))
	}
}

// TestRunStopsInOrder: Run's workers sync the queue's items; once its
// context ends the queue shuts down, the workers return, stop runs after
// them, and done closes last.
func TestRunStopsInOrder(t *testing.T) {
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())
	synced := make(chan string, 1)
	working := make(chan struct{}, 2)
	work := func(ctx context.Context) {
		working <- struct{}{}
		Work(ctx, q, func(_ context.Context, item string) error { synced <- item; return nil }, func(string, error) {})
		working <- struct{}{}
	}
	var order []string
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	Run(ctx, q, 1, work, func() {
		if !q.ShuttingDown() || len(working) != 2 {
			order = append(order, "stop before the worker returned")
			return
		}
		order = append(order, "stop")
	}, done)
	q.Add("a")
	if got := <-synced; got != "a" {
		t.Fatalf("synced %q, want a", got)
	}
	cancel()
	<-done
	if diff := cmp.Diff([]string{"stop"}, order); diff != "" {
		t.Errorf("stop (-want +got):\n%s", diff)
	}
}
