package pool

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/pcsync/pcsync/internal/lib/agentpod"
	"github.com/pcsync/pcsync/internal/lib/podwait"
)

// errMemberChanged is a member's delete refused by its preconditions: it
// changed since the lister had it (a claim, most likely).
var errMemberChanged = errors.New("the member changed since the cache had it")

// remove deletes member pod of pool k (not waiting for it to be gone), its
// delete expected before it is sent. A member that changed in between is
// left alone: the informer's event syncs the pool again.
func (c *Controller) remove(ctx context.Context, k Key, pod *corev1.Pod, why string) error {
	c.log.Info("sandbox: warm pool member removed", slog.String("pod", pod.Namespace+"/"+pod.Name), slog.String("why", why))
	c.exp.expectDelete(k, pod.Name)
	err := c.deleteMember(ctx, pod)
	if err != nil {
		c.exp.deleted(k, pod.Name)
	}
	if errors.Is(err, errMemberChanged) {
		return nil
	}
	return err
}

// deleteMember deletes pod with its UID and resourceVersion as
// preconditions: a member claimed since the lister had it (a lease's pod
// now) is never deleted. errMemberChanged when the preconditions fail;
// nil when it is gone already.
func (c *Controller) deleteMember(ctx context.Context, pod *corev1.Pod) error {
	err := c.cs.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: ptr.To(int64(1)),
		Preconditions:      &metav1.Preconditions{UID: ptr.To(pod.UID), ResourceVersion: ptr.To(pod.ResourceVersion)},
	})
	switch {
	case err == nil, apierrors.IsNotFound(err):
		return nil
	case apierrors.IsConflict(err):
		return fmt.Errorf("Pod/%s/%s: delete: %w", pod.Namespace, pod.Name, errMemberChanged)
	}
	return fmt.Errorf("Pod/%s/%s: delete: %w", pod.Namespace, pod.Name, err)
}

// shrink deletes one member of namespace ns (one that is not Ready first)
// for a lease that needs its room in the quota, holds the namespace's
// refills for QuotaBackoff, and returns once the member is gone; false
// when ns has no member left.
func (c *Controller) shrink(ctx context.Context, ns string) bool {
	c.holds.quotaRefused(ns, time.Now())
	tried := map[types.UID]bool{}
	for {
		pick := c.takeForRoom(ns, tried)
		if pick == nil {
			return false
		}
		err := c.deleteMember(ctx, pick)
		if errors.Is(err, errMemberChanged) && ctx.Err() == nil {
			c.claimed.Delete(pick.UID)
			tried[pick.UID] = true
			continue
		}
		c.log.Info("sandbox: warm pool shrunk for a lease the quota has no room for", slog.String("pod", ns+"/"+pick.Name))
		if err == nil {
			err = podwait.Gone(ctx, c.cs, ns, pick.Name)
		}
		if err != nil && !apierrors.IsNotFound(err) {
			c.log.Warn("sandbox: warm pool member not deleted for room", slog.String("pod", ns+"/"+pick.Name), slog.Any("error", err))
		}
		return true
	}
}

// takeForRoom marks a member of namespace ns as taken (claimed) and
// returns it: one not Ready if any, none of tried; nil when none is left.
func (c *Controller) takeForRoom(ns string, tried map[types.UID]bool) *corev1.Pod {
	pods, _ := c.lister.Pods(ns).List(labels.Everything())
	var ready, notReady []*corev1.Pod
	for _, p := range pods {
		if !c.isMember(p) || tried[p.UID] || p.DeletionTimestamp != nil {
			continue
		}
		if agentpod.Ready(p) {
			ready = append(ready, p)
		} else {
			notReady = append(notReady, p)
		}
	}
	for _, p := range append(notReady, ready...) {
		if _, taken := c.claimed.LoadOrStore(p.UID, true); !taken {
			return p.DeepCopy()
		}
	}
	return nil
}

// MakeRoom makes room in namespace ns's quota for a lease whose pod the
// quota refused: the namespace's pools shrink, one member at a time, and
// create (the lease's create again, true while the quota still refuses it)
// is retried every 200 ms until the quota takes the pod, RoomWait has
// passed, or no member is left.
func (c *Controller) MakeRoom(ctx context.Context, ns string, create func() (refused bool)) {
	deadline := time.Now().Add(c.opts.RoomWait)
	refused := true
	for refused && c.shrink(ctx, ns) {
		// The quota's usage drops once its controller has seen the
		// member gone: retry until then.
		for refused && time.Now().Before(deadline) && ctx.Err() == nil {
			time.Sleep(200 * time.Millisecond)
			refused = create()
		}
	}
}
