package pool

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pcsync/pcsync/pkg/config"
)

// refill creates n members of pool d, one at a time, while its namespace
// is not held; a hold requeues the pool for its end.
func (c *Controller) refill(ctx context.Context, d *Decl, model *config.Model, n int) error {
	if err := c.tenants.Check(ctx, d.key.Namespace, d.Rec.Company); err != nil {
		return fmt.Errorf("pool %s: not refilled: %w", d.key, err)
	}
	for range n {
		if wait := c.holds.held(d.key.Namespace, time.Now()); wait > 0 {
			c.queue.AddAfter(d.key, wait)
			return nil
		}
		if err := c.create(ctx, d, model); err != nil {
			return err
		}
	}
	return nil
}

// create creates one member of pool d, its create expected before it is
// sent. A quota refusal holds the namespace for QuotaBackoff (and is no
// error: the pool syncs again when the hold ends).
func (c *Controller) create(ctx context.Context, d *Decl, model *config.Model) error {
	pod, r, err := c.build(d, model, time.Now())
	if err != nil {
		return fmt.Errorf("pool %s: member not built: %w", d.key, err)
	}
	began := time.Now()
	c.exp.expectCreate(d.key, pod.Name)
	if _, err := c.cs.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{FieldManager: "pcsync"}); err != nil {
		c.exp.created(d.key, pod.Name)
		err, full := c.refused(r, err)
		if !full {
			return fmt.Errorf("pool %s: member not created: %w", d.key, err)
		}
		c.holds.quotaRefused(d.key.Namespace, time.Now())
		if !errors.Is(err, context.Canceled) {
			c.log.Warn("sandbox: warm pool member not created", slog.String("pool", d.key.String()), slog.Any("error", err))
		}
		return nil
	}
	c.log.Debug("sandbox: warm pool member created", slog.String("pod", pod.Namespace+"/"+pod.Name),
		slog.String("image", r.Image), slog.Duration("took", time.Since(began).Round(time.Millisecond)))
	return nil
}
