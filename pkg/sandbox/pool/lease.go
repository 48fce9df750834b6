package pool

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"k8s.io/client-go/tools/leaderelection"

	"github.com/pcsync/pcsync/internal/lib/leader"
)

// LeaseOptions configure the Lease that lets one pool controller of
// an owner act at a time (see Controller.elect). Zero fields, and
// negative durations, take DefaultLeaseOptions' values.
type LeaseOptions struct {
	// Namespace holds the Lease: the namespace of the daemon's own
	// leader-election Lease (pcsync's own namespace, where its Role grants
	// leases get, create and update). Default leader.DefaultNamespace().
	Namespace string
	// Identity names this controller in the Lease; unique per process.
	// Default leader.DefaultIdentity().
	Identity string
	// LeaseDuration is how long a standby waits after the last renewal it
	// saw before it takes over a Lease its holder did not release (it
	// died). Default 15s.
	LeaseDuration time.Duration
	// RenewDeadline is how long the holder tries to renew before it stops
	// acting. Default 10s; shorter than LeaseDuration.
	RenewDeadline time.Duration
	// RetryPeriod is the time between attempts to take or renew the Lease:
	// a released Lease is taken over within it. Default 2s.
	RetryPeriod time.Duration
}

// DefaultLeaseOptions returns the pool Lease's defaults: the daemon's
// leader-election defaults.
func DefaultLeaseOptions() LeaseOptions {
	lo := leader.DefaultOptions()
	return LeaseOptions{Namespace: lo.Namespace, Identity: lo.Identity,
		LeaseDuration: lo.LeaseDuration, RenewDeadline: lo.RenewDeadline, RetryPeriod: lo.RetryPeriod}
}

// validate refuses timings the election cannot keep (client-go's rules).
func (o *LeaseOptions) validate() error {
	if o.RenewDeadline >= o.LeaseDuration {
		return fmt.Errorf("pool Lease: renew deadline %v must be shorter than the lease duration %v", o.RenewDeadline, o.LeaseDuration)
	}
	if float64(o.RenewDeadline) <= leaderelection.JitterFactor*float64(o.RetryPeriod) {
		return fmt.Errorf("pool Lease: renew deadline %v must be longer than %v × the retry period %v",
			o.RenewDeadline, leaderelection.JitterFactor, o.RetryPeriod)
	}
	return nil
}

// Check says whether the Lease's timings, zero ones taking the defaults,
// can be kept (client-go's rules); New's controller would not elect.
func (o Options) Check() error {
	o.complete()
	return o.Lease.validate()
}

func (o *LeaseOptions) complete() {
	d := DefaultLeaseOptions()
	o.Namespace = cmp.Or(o.Namespace, d.Namespace)
	o.Identity = cmp.Or(o.Identity, d.Identity)
	o.LeaseDuration = cmp.Or(max(o.LeaseDuration, 0), d.LeaseDuration)
	o.RenewDeadline = cmp.Or(max(o.RenewDeadline, 0), d.RenewDeadline)
	o.RetryPeriod = cmp.Or(max(o.RetryPeriod, 0), d.RetryPeriod)
}

// LeaseName is the name of owner's pool Lease: "pcsync-pool-" and the
// first 16 hex digits of the owner's SHA-256 (an owner, an ApplySet ID,
// may hold characters a Lease's name may not).
func LeaseName(owner string) string {
	sum := sha256.Sum256([]byte(owner))
	return "pcsync-pool-" + hex.EncodeToString(sum[:8])
}

// elect runs the controller's side of the owner's Lease until ctx ends:
// while this controller holds it, its pools sync (lead); otherwise it
// stands by, and syncs nothing. A lost Lease (not renewed in time) makes
// it a candidate again.
func (c *Controller) elect(ctx context.Context) {
	lo := c.leaseOptions()
	for ctx.Err() == nil {
		err := leader.Run(ctx, c.cs, lo, c.lead)
		if err == nil || ctx.Err() != nil {
			continue
		}
		if !errors.Is(err, leader.ErrLeadershipLost) {
			c.log.Error("sandbox: "+c.who()+": cannot take part in its Lease; no pool syncs here", slog.Any("error", err))
		}
		select {
		case <-ctx.Done():
		case <-time.After(lo.RetryPeriod):
		}
	}
}

func (c *Controller) leaseOptions() leader.Options {
	l := c.opts.Lease
	lo := leader.DefaultOptions()
	lo.Namespace, lo.Name, lo.Identity = l.Namespace, LeaseName(c.opts.Owner), l.Identity
	lo.LeaseDuration, lo.RenewDeadline, lo.RetryPeriod = l.LeaseDuration, l.RenewDeadline, l.RetryPeriod
	lo.ReleaseOnCancel = true
	lo.Logger = c.log.With(slog.String("pool_owner", c.opts.Owner))
	lo.OnNewLeader = c.standingBy
	lo.OnLeading = func(leading bool) {
		if leading {
			c.holder.Store(&l.Identity)
		}
	}
	return lo
}

// who names this controller in its logs.
func (c *Controller) who() string {
	return "pool controller of owner " + c.opts.Owner
}

// standingBy: another controller of the owner holds the Lease.
func (c *Controller) standingBy(identity string) {
	c.holder.Store(&identity)
	c.log.Info("sandbox: "+c.who()+": standing by, held by "+identity,
		slog.String("lease", c.opts.Lease.Namespace+"/"+LeaseName(c.opts.Owner)), slog.String("identity", c.opts.Lease.Identity))
}

// lead is the work of the Lease's holder: its pools sync until ctx ends
// (the controller closes, or the Lease is lost); it returns, and so lets
// the Lease go, only once no sync is in flight.
func (c *Controller) lead(ctx context.Context) error {
	c.acting.Lock()
	c.leading = true
	c.acting.Unlock()
	c.metrics.SandboxPoolActing(true)
	c.log.Info("sandbox: "+c.who()+": acting (holds its Lease)",
		slog.String("lease", c.opts.Lease.Namespace+"/"+LeaseName(c.opts.Owner)), slog.String("identity", c.opts.Lease.Identity))
	c.enqueueAll()
	<-ctx.Done()
	c.acting.Lock()
	c.leading = false
	c.acting.Unlock()
	c.metrics.SandboxPoolActing(false)
	c.log.Info("sandbox: " + c.who() + ": stopped acting")
	return nil
}

// syncIfLeading syncs pool k while this controller holds the owner's
// Lease; a standby drops k (the next holder queues every pool).
func (c *Controller) syncIfLeading(ctx context.Context, k Key) error {
	c.acting.RLock()
	defer c.acting.RUnlock()
	if !c.leading {
		return nil
	}
	return c.sync(ctx, k)
}

// enqueueAll queues every declared pool and every pool with members.
func (c *Controller) enqueueAll() {
	if cfg := c.cfg.Load(); cfg != nil {
		for k := range cfg.pools {
			c.queue.Add(k)
		}
	}
	for _, s := range c.informer.GetIndexer().ListIndexFuncValues(c.index) {
		c.queue.Add(parseKey(s))
	}
}

// Leadership says whether this controller acts on its owner's pools, and
// the identity of the one that does ("" while none is known).
func (c *Controller) Leadership() (acting bool, holder string) {
	c.acting.RLock()
	acting = c.leading
	c.acting.RUnlock()
	if h := c.holder.Load(); h != nil {
		holder = *h
	}
	return acting, holder
}
