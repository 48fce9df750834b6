package daemon

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/pcsync/pcsync/internal/doctor"
	"github.com/pcsync/pcsync/pkg/config"
	"github.com/pcsync/pcsync/pkg/metrics"
	"github.com/pcsync/pcsync/pkg/reconcile"
)

// NetworkCheck is the daemon's network check at start: once the first
// reconcile has loaded (and, with an applier, applied) a valid config, it
// runs doctor's probe (doctor.ProbeNetwork) once in the background, and
// logs a warning when the tenants' NetworkPolicies are not enforced (or
// cannot be proven), setting pcsync_network_policies_enforced. It never
// blocks or stops the daemon. Before any tenant namespace exists it tries
// again every retry, tries times.
type NetworkCheck struct {
	log   *slog.Logger
	cs    kubernetes.Interface
	gauge *metrics.NetworkPolicyEnforcement
	opts  doctor.NetworkOptions
	retry time.Duration
	tries int

	model atomic.Pointer[config.Model]
	once  sync.Once
}

// NewNetworkCheck returns the check, which reports to log and m.
func NewNetworkCheck(log *slog.Logger, cs kubernetes.Interface, m *metrics.Metrics) *NetworkCheck {
	return &NetworkCheck{log: log, cs: cs, gauge: metrics.NewNetworkPolicyEnforcement(m.Registry),
		opts: doctor.DefaultNetworkOptions(), retry: 30 * time.Second, tries: 20}
}

// Observe wraps the reconcile loop's Observe next: it keeps the last good
// model, and starts the check after the first successful reconcile.
func (n *NetworkCheck) Observe(ctx context.Context, next func(reconcile.Outcome)) func(reconcile.Outcome) {
	return func(out reconcile.Outcome) {
		if next != nil {
			next(out)
		}
		if out.Model == nil || out.Err != nil {
			return
		}
		n.model.Store(out.Model)
		n.once.Do(func() { go n.run(ctx) })
	}
}

// run probes until a tenant namespace exists (at most tries times), then
// reports what it found.
func (n *NetworkCheck) run(ctx context.Context) {
	for i := 0; ; i++ {
		r := doctor.ProbeNetwork(ctx, n.cs, n.model.Load(), n.opts)
		if ctx.Err() != nil {
			return
		}
		if r.NoTenant && i+1 < n.tries {
			select {
			case <-ctx.Done():
				return
			case <-time.After(n.retry):
			}
			continue
		}
		n.report(r)
		return
	}
}

func (n *NetworkCheck) report(r doctor.NetworkResult) {
	attrs := []any{slog.String("namespace", r.Namespace), slog.String("detail", r.Message()),
		slog.String("skip", "--skip-network-check")}
	// The log first, then the gauge: whoever sees the gauge sees the line.
	switch r.Verdict {
	case doctor.Enforced:
		n.log.Info("network check: NetworkPolicies are enforced", slog.String("namespace", r.Namespace), slog.String("detail", r.Message()))
		n.gauge.Set(metrics.NetworkPoliciesEnforced)
	case doctor.NotEnforced:
		n.log.Warn(doctor.NotEnforcedMessage, attrs...)
		n.gauge.Set(metrics.NetworkPoliciesNotEnforced)
	default:
		n.log.Warn("network check: could not prove that NetworkPolicies are enforced: agents may not be isolated", attrs...)
		n.gauge.Set(metrics.NetworkPoliciesUnproven)
	}
}
