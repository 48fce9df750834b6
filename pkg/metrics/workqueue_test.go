package metrics

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/client-go/util/workqueue"
)

// TestWorkqueue: a client-go queue built with the provider reports into
// the daemon's registry under its name.
func TestWorkqueue(t *testing.T) {
	m := New()
	q := workqueue.NewTypedWithConfig(workqueue.TypedQueueConfig[string]{Name: "runs", MetricsProvider: m.Workqueue()})
	defer q.ShutDown()
	q.Add("a")
	q.Add("b")
	q.Add("a") // already queued: not added again
	key, _ := q.Get()
	q.Done(key)
	got := map[string]float64{
		"adds":  testutil.ToFloat64(m.workqueue.adds.WithLabelValues("runs")),
		"depth": testutil.ToFloat64(m.workqueue.depth.WithLabelValues("runs")),
	}
	want := map[string]float64{"adds": 2, "depth": 1}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("queue metrics (-want +got):\n%s", diff)
	}
	if n, err := testutil.GatherAndCount(m.Registry, "pcsync_workqueue_adds_total"); err != nil || n != 1 {
		t.Errorf("pcsync_workqueue_adds_total series: %d, %v; want 1", n, err)
	}
}
