package agentenv

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// NoDNSNameserver is the one nameserver of an agent pod in egress mode
// proxy: the pod's own loopback, where nothing listens, so that a lookup
// fails at once (port unreachable) instead of waiting out a resolver the
// tenant's NetworkPolicy no longer lets it reach.
const NoDNSNameserver = "127.0.0.1"

// NoClusterDNS takes cluster DNS away from an agent pod of a company in
// egress mode proxy: dnsPolicy None with NoDNSNameserver as the only
// nameserver, no search domains, one attempt. The names the pod reaches
// without the proxy (the Paperclip server's) come from aliases, as its
// /etc/hosts; every other name is the proxy's to resolve, so a DNS query
// cannot carry data out of the pod. It replaces any DNS config the pod had.
func NoClusterDNS(spec *corev1.PodSpec, aliases []corev1.HostAlias) {
	spec.DNSPolicy = corev1.DNSNone
	spec.DNSConfig = &corev1.PodDNSConfig{
		Nameservers: []string{NoDNSNameserver},
		Options: []corev1.PodDNSConfigOption{
			{Name: "attempts", Value: ptr.To("1")},
			{Name: "timeout", Value: ptr.To("1")},
		},
	}
	spec.HostAliases = append([]corev1.HostAlias(nil), aliases...)
}
