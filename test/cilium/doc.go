// Package cilium checks pcsync's egress mode cilium as far as it can be
// checked without Cilium: its integration tests load Cilium's own
// CiliumNetworkPolicy CRD into the test control plane
// (testcluster.InstallCiliumCRD), so that the API server validates every
// CiliumNetworkPolicy pcsync renders with Cilium's schema. Nothing enforces
// them here (no Cilium agent runs); enforcement is proven on the real node
// for the modes a NetworkPolicy enforcer serves.
package cilium
