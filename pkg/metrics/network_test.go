package metrics

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestNetworkPolicyEnforcement: the gauge is served from the start at -1
// (not proven), and takes what the check found.
func TestNetworkPolicyEnforcement(t *testing.T) {
	m := New()
	n := NewNetworkPolicyEnforcement(m.Registry)
	const head = "# HELP pcsync_network_policies_enforced Whether the daemon's network check at start proved the tenants' NetworkPolicies enforced: 1 yes, 0 no (agents are not isolated), -1 not proven.\n# TYPE pcsync_network_policies_enforced gauge\n"
	for _, v := range []int{NetworkPoliciesUnproven, NetworkPoliciesNotEnforced, NetworkPoliciesEnforced} {
		if v != NetworkPoliciesUnproven {
			n.Set(v)
		}
		want := head + "pcsync_network_policies_enforced " + map[int]string{-1: "-1", 0: "0", 1: "1"}[v] + "\n"
		if err := testutil.GatherAndCompare(m.Registry, strings.NewReader(want), "pcsync_network_policies_enforced"); err != nil {
			t.Errorf("value %d: %v", v, err)
		}
	}
}
