package pool

import (
	"cmp"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/pcsync/pcsync/internal/lib/agentpod"
)

// Take marks the oldest Ready member of pool k that is not marked and
// not in tried as taken (no sync counts it, no other claim takes it), and
// returns it for a claim; nil when there is none.
func (c *Controller) Take(k Key, tried map[types.UID]bool) *corev1.Pod {
	objs, _ := c.informer.GetIndexer().ByIndex(c.index, k.String())
	pods := make([]*corev1.Pod, 0, len(objs))
	for _, o := range objs {
		if pod := o.(*corev1.Pod); agentpod.Ready(pod) && pod.DeletionTimestamp == nil && !tried[pod.UID] {
			pods = append(pods, pod)
		}
	}
	slices.SortFunc(pods, func(a, b *corev1.Pod) int {
		return cmp.Or(a.CreationTimestamp.Compare(b.CreationTimestamp.Time), cmp.Compare(a.Name, b.Name))
	})
	for _, pod := range pods {
		if _, taken := c.claimed.LoadOrStore(pod.UID, true); !taken {
			// A taken member no longer counts: hold the refill it
			// leaves for the company's delay (deleted holds it too, in
			// the daemon that syncs the pools).
			if d := c.declared(k); d != nil {
				c.holds.claimed(k.Namespace, time.Now(), d.refillDelay)
			}
			return pod.DeepCopy()
		}
	}
	return nil
}

// Untake unmarks member uid, which Take gave a claim that failed: another
// claim may take it, and the pool counts it again.
func (c *Controller) Untake(uid types.UID) { c.claimed.Delete(uid) }
