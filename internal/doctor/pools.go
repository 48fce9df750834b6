package doctor

import (
	"context"
	"fmt"
	"reflect"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pcsync/pcsync/internal/lib/agentpod"
	"github.com/pcsync/pcsync/pkg/config"
	"github.com/pcsync/pcsync/pkg/podsched"
	"github.com/pcsync/pcsync/pkg/sandbox/leasepod"
	"github.com/pcsync/pcsync/pkg/sandbox/pool"
)

// checkPools shows each warm pool a company declares (spec.sandbox.warmPool)
// against its members in the tenant namespace: a member is a pod of the
// pool's label whose image and scheduling are the pool's. All declared
// members Ready is OK; fewer (a refill under way, a quota too small, no
// daemon with --sandbox) is a warning, and so are members no pool declares
// (the daemon drains them).
func (d *doctor) checkPools(ctx context.Context) {
	if d.model == nil {
		return
	}
	for i := range d.model.Companies {
		c := &d.model.Companies[i]
		if c.Spec.Sandbox == nil || len(c.Spec.Sandbox.WarmPool) == 0 {
			continue
		}
		ns := d.model.Namespace(c)
		list, err := d.cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: pool.Label})
		if err != nil {
			d.add("warm pool", ns, StatusFail, "listing its members: %v", err)
			continue
		}
		matched := map[string]bool{}
		for _, p := range c.Spec.Sandbox.WarmPool {
			image := d.model.WarmPoolImage(p)
			members, ready := 0, 0
			for j := range list.Items {
				pod := &list.Items[j]
				if matched[pod.Name] || pod.DeletionTimestamp != nil || !poolMember(pod, c, p, image) {
					continue
				}
				matched[pod.Name] = true
				members++
				if podReady(pod) {
					ready++
				}
			}
			name := fmt.Sprintf("%s %s", ns, image)
			if p.Agent != "" {
				name += " (agent " + p.Agent + ")"
			}
			st := StatusOK
			if ready < p.Count {
				st = StatusWarn
			}
			d.add("warm pool", name, st, "declared %d, members %d, Ready %d", p.Count, members, ready)
		}
		if n := len(list.Items) - len(matched); n > 0 {
			d.add("warm pool", ns, StatusWarn, "%d members of no declared pool: the daemon drains them", n)
		}
	}
}

// poolMember says pod is a member of pool p of company c: its image and
// scheduling are the pool's.
func poolMember(pod *corev1.Pod, c *config.Company, p config.WarmPool, image string) bool {
	if agentpod.ContainerImage(pod, leasepod.ContainerName) != image {
		return false
	}
	a, _ := c.Agent(p.Agent)
	want := podsched.For(c, a)
	got := podsched.Of(&pod.Spec)
	if len(want.NodeSelector) != len(got.NodeSelector) || (len(want.NodeSelector) > 0 && !reflect.DeepEqual(want.NodeSelector, got.NodeSelector)) {
		return false
	}
	// The API server adds tolerations of its own (not-ready, unreachable).
	for _, t := range want.Tolerations {
		if !slices.ContainsFunc(got.Tolerations, func(g corev1.Toleration) bool { return reflect.DeepEqual(g, t) }) {
			return false
		}
	}
	return true
}

// podReady says the pod runs and is Ready.
func podReady(p *corev1.Pod) bool {
	if p.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
