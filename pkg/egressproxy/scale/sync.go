package scale

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	autoscalingv1ac "k8s.io/client-go/applyconfigurations/autoscaling/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/pcsync/pcsync/pkg/egressproxy/allow"
)

// decision is what sync makes of one namespace: the replicas its proxy
// should have, and when to look again (0: when something changes).
type decision struct {
	replicas int32
	after    time.Duration
	reason   string
}

// state is what decide reads of one namespace.
type state struct {
	// current is the Deployment's replicas.
	current int32
	// busy: a live agent pod, or a Need not yet past.
	busy bool
	// since is when the namespace was last busy, or first seen.
	since time.Time
	// idle is the idle period; 0: never scaled down.
	idle time.Duration
}

// decide scales a busy namespace's proxy to one, and an idle one to zero
// once its idle period has passed since it was last busy.
func decide(s state, now time.Time) decision {
	switch {
	case s.busy:
		return decision{replicas: 1, reason: "busy"}
	case s.idle <= 0:
		return decision{replicas: max(s.current, 1), reason: "never idle"}
	case s.current == 0:
		return decision{replicas: 0, reason: "idle"}
	}
	if left := s.since.Add(s.idle).Sub(now); left > 0 {
		return decision{replicas: s.current, after: left, reason: "idle for less than its period"}
	}
	return decision{replicas: 0, reason: "idle for its period"}
}

// sync scales namespace ns's proxy as decide says, and returns when to
// look again.
func (c *Controller) sync(ctx context.Context, ns string) (time.Duration, error) {
	d, err := c.lister.Deployments(ns).Get(allow.ProxyName)
	if apierrors.IsNotFound(err) {
		c.forget(ns)
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	idle, ok := c.opts.Idle(ns)
	if !ok || d.DeletionTimestamp != nil {
		return 0, nil // not a company's (yet): its replicas are left alone
	}
	busy, err := c.busyPods(ns)
	if err != nil {
		return 0, err
	}
	now := c.opts.Now()
	if busy {
		c.needMet(ns) // the pod a Need was for is here: it keeps the proxy now
	}
	need := c.needLeft(ns, now)
	current := replicas(d.Spec.Replicas)
	// A proxy woken by someone else (another replica's Need) counts as
	// busy now: its run's pod may not exist yet. (woken records the
	// replicas at every sync: called only when not busy otherwise, it
	// kept a stale 0 and took the end of a run for a wake.)
	woken := c.woken(ns, current)
	busy = busy || need > 0 || woken
	s := state{current: current, busy: busy, idle: idle, since: c.lastBusy(ns, now, busy)}
	dec := decide(s, now)
	c.opts.Logger.Debug("egress proxy scale: sync", slog.String("namespace", ns), slog.Bool("busy", s.busy),
		slog.Duration("need", need), slog.Int("replicas", int(s.current)), slog.Time("idleSince", s.since),
		slog.Int("want", int(dec.replicas)), slog.String("reason", dec.reason))
	if need > 0 {
		dec.after = need // the Need passes: look again
	}
	if dec.replicas == s.current {
		return dec.after, nil
	}
	if err := c.scale(ctx, ns, dec.replicas); err != nil {
		return 0, err
	}
	c.opts.Logger.Info("egress proxy scaled", slog.String("namespace", ns), slog.Int("from", int(s.current)),
		slog.Int("to", int(dec.replicas)), slog.String("reason", dec.reason))
	return dec.after, nil
}

// scale applies n replicas to ns's proxy Deployment as FieldManager.
func (c *Controller) scale(ctx context.Context, ns string, n int32) error {
	ac := autoscalingv1ac.Scale().WithSpec(autoscalingv1ac.ScaleSpec().WithReplicas(n))
	_, err := c.cs.AppsV1().Deployments(ns).ApplyScale(ctx, allow.ProxyName, ac, metav1.ApplyOptions{FieldManager: FieldManager, Force: true})
	if err != nil {
		return fmt.Errorf("Deployment/%s/%s: scale to %d: %w", ns, allow.ProxyName, n, err)
	}
	return nil
}

// busyPods reports whether ns holds a live agent pod.
func (c *Controller) busyPods(ns string) (bool, error) {
	objs, err := c.pods.GetIndexer().ByIndex(cache.NamespaceIndex, ns)
	if err != nil {
		return false, fmt.Errorf("pods of %s: %w", ns, err)
	}
	for _, o := range objs {
		if p, ok := o.(*corev1.Pod); ok && isAgent(p) && live(p) {
			return true, nil
		}
	}
	return false, nil
}

// lastBusy returns when ns was last busy: now while it is, the moment
// this controller first saw it idle after that, and when it first saw it
// for a namespace never seen busy.
func (c *Controller) lastBusy(ns string, now time.Time, busy bool) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	m, seen := c.busy[ns]
	if busy || !seen || m.busy {
		c.busy[ns] = mark{at: now, busy: busy}
		return now
	}
	return m.at
}

// woken records ns's replicas and reports whether they rose from zero
// since the last sync.
func (c *Controller) woken(ns string, current int32) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	prev, seen := c.replicas[ns]
	c.replicas[ns] = current
	return seen && prev == 0 && current > 0
}

// needMet drops ns's Need: a live agent pod keeps the proxy up now, and
// the idle period counts from its end.
func (c *Controller) needMet(ns string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.needed, ns)
}

// needLeft is how long a Need keeps ns busy from now (0: none).
func (c *Controller) needLeft(ns string, now time.Time) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	until, ok := c.needed[ns]
	if !ok {
		return 0
	}
	if !now.Before(until) {
		delete(c.needed, ns)
		return 0
	}
	return until.Sub(now)
}

// forget drops what the controller knows of a namespace without a proxy.
func (c *Controller) forget(ns string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.busy, ns)
	delete(c.needed, ns)
	delete(c.replicas, ns)
	delete(c.waking, ns)
}

func replicas(p *int32) int32 {
	if p == nil {
		return 1
	}
	return *p
}
