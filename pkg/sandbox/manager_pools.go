package sandbox

import (
	"context"
	"log/slog"
	"time"

	"k8s.io/client-go/tools/cache"

	"github.com/pcsync/pcsync/internal/lib/podinformer"

	"github.com/pcsync/pcsync/pkg/sandbox/leasepod"
	"github.com/pcsync/pcsync/pkg/sandbox/pool"
)

// startPools starts the warm pools' controller (package pool) on the
// daemon's pod informer (Options.Pods). A daemon that cannot watch pods
// keeps no pool (and says so): leases start cold.
func (m *Manager) startPools(ctx context.Context) {
	if m.opts.Pool.Disabled {
		return
	}
	pods, err := m.podInformer()
	if err != nil {
		m.log.Warn("sandbox: no warm pools: the daemon cannot list and watch pods (cluster-wide get, list, watch on pods); leases start cold", slog.Any("error", err))
		return
	}
	c := pool.New(pool.Deps{Client: m.cs, Pods: pods, Log: m.log, Metrics: m.opts.Metrics, QueueMetrics: m.opts.QueueMetrics, Options: m.opts.Pool, Tenants: m.tenants,
		Model: m.model, Place: m.placeServer, HostRoot: m.opts.HostRoot, MaxLeaseTTL: m.opts.MaxLeaseTTL,
		Refused: refusedMember, Ready: m.memberReady, Gone: m.memberGone})
	if err := c.Start(ctx); err != nil {
		m.log.Warn("sandbox: no warm pools: the daemon cannot list and watch pods (cluster-wide get, list, watch on pods); leases start cold", slog.Any("error", err))
		return
	}
	m.pools = c
}

// podInformer is Options.Pods, else an informer of the Manager's own,
// started now and stopped by Close.
func (m *Manager) podInformer() (cache.SharedIndexInformer, error) {
	if m.opts.Pods != nil {
		return m.opts.Pods, nil
	}
	inf := podinformer.New(m.cs, podinformer.Options{SyncTimeout: 30 * time.Second})
	if err := inf.Start(m.base()); err != nil {
		inf.Stop()
		return nil, err
	}
	m.ownPods = inf
	return inf, nil
}

// ConfigChanged tells the Manager that its model func returns a new
// config: the warm pools are declared again from it at once, and the
// pools it changed are queued (without it, the next Resync finds it). It
// does not block; calls while one is pending count once.
func (m *Manager) ConfigChanged() {
	if m.pools != nil {
		m.pools.ConfigChanged()
	}
}

// Pools returns each warm pool against its declaration, sorted by
// namespace and image: nil when the daemon keeps no pools.
func (m *Manager) Pools() []pool.Status {
	if m.pools == nil {
		return nil
	}
	return m.pools.Status()
}

// refusedMember explains a warm pool member's refused create as a lease's
// is (createError), and says whether the quota refused it.
func refusedMember(r leasepod.Record, err error) (error, bool) {
	err = createError(r, err)
	return err, quotaFull(err)
}
