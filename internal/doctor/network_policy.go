package doctor

import (
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// egressAllows says whether the NetworkPolicies of a namespace let a pod of
// podLabels open a TCP connection to ip:port, as a plugin that enforces
// them would; a target they allow proves nothing about enforcement. A pod
// that no Egress policy selects may reach anything. It errs towards
// "allowed": a rule whose peer selects pods (which an address may be, for
// a host-network pod) allows the address when its ports do, and so does a
// named port.
func egressAllows(policies []networkingv1.NetworkPolicy, podLabels map[string]string, ip netip.Addr, port int) bool {
	selected := false
	for i := range policies {
		p := &policies[i]
		if !hasEgress(p) || !selects(p.Spec.PodSelector, podLabels) {
			continue
		}
		selected = true
		for _, r := range p.Spec.Egress {
			if portsAllow(r.Ports, port) && peersAllow(r.To, ip) {
				return true
			}
		}
	}
	return !selected
}

func hasEgress(p *networkingv1.NetworkPolicy) bool {
	if len(p.Spec.PolicyTypes) == 0 {
		return len(p.Spec.Egress) > 0
	}
	return slices.Contains(p.Spec.PolicyTypes, networkingv1.PolicyTypeEgress)
}

func selects(sel metav1.LabelSelector, podLabels map[string]string) bool {
	s, err := metav1.LabelSelectorAsSelector(&sel)
	if err != nil {
		return true // a selector the API server accepted; when in doubt, it selects
	}
	return s.Matches(labels.Set(podLabels))
}

func portsAllow(ports []networkingv1.NetworkPolicyPort, port int) bool {
	if len(ports) == 0 {
		return true
	}
	for _, p := range ports {
		if p.Protocol != nil && *p.Protocol != corev1.ProtocolTCP {
			continue
		}
		if p.Port == nil || p.Port.StrVal != "" {
			return true // every port, or a named port of some pod
		}
		lo, hi := int(p.Port.IntVal), int(p.Port.IntVal)
		if p.EndPort != nil {
			hi = int(*p.EndPort)
		}
		if port >= lo && port <= hi {
			return true
		}
	}
	return false
}

func peersAllow(peers []networkingv1.NetworkPolicyPeer, ip netip.Addr) bool {
	if len(peers) == 0 {
		return true
	}
	for _, peer := range peers {
		if peer.IPBlock == nil {
			return true // pods: an address may be a host-network pod's
		}
		if cidrContains(peer.IPBlock.CIDR, ip) && !slices.ContainsFunc(peer.IPBlock.Except, func(e string) bool { return cidrContains(e, ip) }) {
			return true
		}
	}
	return false
}

func cidrContains(cidr string, ip netip.Addr) bool {
	p, err := netip.ParsePrefix(cidr)
	return err == nil && p.Contains(ip.Unmap())
}
