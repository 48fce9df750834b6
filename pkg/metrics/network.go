package metrics

import "github.com/prometheus/client_golang/prometheus"

// NetworkPolicyEnforcement is the gauge pcsync_network_policies_enforced:
// what the daemon's network check at start (internal/doctor's
// ProbeNetwork) found: 1 a probe pod in a tenant namespace was kept from
// what its NetworkPolicies forbid, 0 it reached it (the cluster does not
// enforce NetworkPolicies: agents are not isolated), -1 not proven (not
// run yet, skipped, or the probe could not tell).
type NetworkPolicyEnforcement struct {
	gauge prometheus.Gauge
}

// The values of pcsync_network_policies_enforced.
const (
	NetworkPoliciesEnforced    = 1
	NetworkPoliciesNotEnforced = 0
	NetworkPoliciesUnproven    = -1
)

// NewNetworkPolicyEnforcement registers the gauge in reg, at
// NetworkPoliciesUnproven.
func NewNetworkPolicyEnforcement(reg prometheus.Registerer) *NetworkPolicyEnforcement {
	g := prometheus.NewGauge(prometheus.GaugeOpts{Namespace: namespace, Name: "network_policies_enforced",
		Help: "Whether the daemon's network check at start proved the tenants' NetworkPolicies enforced: 1 yes, 0 no (agents are not isolated), -1 not proven."})
	g.Set(NetworkPoliciesUnproven)
	reg.MustRegister(g)
	return &NetworkPolicyEnforcement{gauge: g}
}

// Set records the check's finding (one of the values above).
func (n *NetworkPolicyEnforcement) Set(v int) { n.gauge.Set(float64(v)) }
