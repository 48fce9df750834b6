package scale

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/pcsync/pcsync/pkg/egressproxy/allow"
)

// Need keeps namespace ns's proxy up, or brings it up, for a run or lease
// about to make its pod: the proxy starts while the pod does. It lasts
// until a live agent pod of ns is seen, Options.NeedFor at most. It reports
// false while the proxy is waking from zero (asleep now, or woken within
// NeedFor: an available pod is not yet a Service that routes to it), and
// the run's pod must then wait for it. A proxy that is up, or was never
// asleep (a new company's, starting with its Deployment), reports true.
func (c *Controller) Need(ns string) (up bool) {
	now := c.opts.Now()
	c.mu.Lock()
	defer func() {
		c.mu.Unlock()
		c.queue.Add(ns)
	}()
	c.needed[ns] = now.Add(c.opts.NeedFor)
	d, err := c.lister.Deployments(ns).Get(allow.ProxyName)
	if err != nil {
		return true // no proxy to wait for: the run says why
	}
	if replicas(d.Spec.Replicas) == 0 {
		c.waking[ns] = now
		return false
	}
	if woke, ok := c.waking[ns]; ok {
		if now.Sub(woke) < c.opts.NeedFor {
			return false
		}
		delete(c.waking, ns)
	}
	return true
}

// available reports whether a proxy Deployment has an available pod of
// its latest spec: a proxy just scaled up from zero may still report its
// old pod.
func available(d *appsv1.Deployment) bool {
	return replicas(d.Spec.Replicas) > 0 && d.Status.ObservedGeneration >= d.Generation && d.Status.AvailableReplicas > 0
}

// Ready waits until namespace ns's proxy has an available pod of its
// latest spec, or ctx ends (the Service may take a moment longer to send
// to it). A namespace without a proxy Deployment is an error.
func (c *Controller) Ready(ctx context.Context, ns string) error {
	for {
		c.mu.Lock()
		changed := c.ready
		c.mu.Unlock()
		d, err := c.lister.Deployments(ns).Get(allow.ProxyName)
		if err != nil {
			return fmt.Errorf("Deployment/%s/%s: %w", ns, allow.ProxyName, err)
		}
		if available(d) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("Deployment/%s/%s: no available proxy pod yet: %w", ns, allow.ProxyName, context.Cause(ctx))
		case <-changed:
		}
	}
}

// Resync looks at every proxy again: the idle periods changed.
func (c *Controller) Resync() {
	ds, err := c.lister.List(labels.Everything())
	if err != nil {
		return
	}
	for _, d := range ds {
		c.queue.Add(d.Namespace)
	}
}
