package tokensync

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/pcsync/pcsync/internal/lib/agentpod"
	"github.com/pcsync/pcsync/pkg/metrics"
)

// TestQueueMetrics is a narrow unit test of the wiring (the controller
// itself runs against a real API server in controller_integration_test):
// with QueueMetrics, the controller's queue reports as "tokensync" in the
// daemon's registry once a proxy pod is queued.
func TestQueueMetrics(t *testing.T) {
	cs := fake.NewClientset(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "proxy", Namespace: "acme",
		Labels: map[string]string{agentpod.LabelManagedBy: agentpod.ManagedByValue, agentpod.LabelRole: agentpod.RoleEgressProxy}}})
	m := metrics.New()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := New(cs, Options{QueueMetrics: m.Workqueue()}).Run(ctx); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for adds(t, m, "tokensync") < 1 {
		if time.Now().After(deadline) {
			t.Fatal(`no pcsync_workqueue_adds_total{name="tokensync"} after 10 s`)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// adds is pcsync_workqueue_adds_total of queue name in m.
func adds(t *testing.T, m *metrics.Metrics, name string) float64 {
	t.Helper()
	mfs, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "pcsync_workqueue_adds_total" {
			continue
		}
		for _, s := range mf.GetMetric() {
			for _, l := range s.GetLabel() {
				if l.GetName() == "name" && l.GetValue() == name {
					return s.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}
