package testcluster

import (
	"context"
	"encoding/json"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// OnlyRealNode makes the real node the one place a pod can go until t ends:
// its taint is lifted and the kwok node cordoned, and both are put back
// after. A manifest then lands on the real node as it is, with no
// nodeSelector or toleration of the test's.
func (c *Cluster) OnlyRealNode(t testing.TB) {
	t.Helper()
	if c.RealNode() == nil {
		t.Fatalf("the cluster has no real node (TestMain sets Options.RealNode): %v", c.RealNodeError())
	}
	ctx := context.Background()
	cs := c.Client()
	node := c.RealNode().Name()
	n, err := cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	taints := n.Spec.Taints
	patch := func(name string, spec map[string]any) {
		b, _ := json.Marshal(map[string]any{"spec": spec})
		if _, err := cs.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, b, metav1.PatchOptions{}); err != nil {
			t.Fatalf("Node %s: %v", name, err)
		}
	}
	patch(node, map[string]any{"taints": []corev1.Taint{}})
	patch(c.NodeName(), map[string]any{"unschedulable": true})
	t.Cleanup(func() {
		patch(c.NodeName(), map[string]any{"unschedulable": nil})
		patch(node, map[string]any{"taints": taints})
	})
}
