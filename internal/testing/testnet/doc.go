// Package testnet gives tests network targets that never leave the machine: a
// network namespace the test creates, joined to the host by a veth pair, holding
// addresses such as 203.0.113.10 (a "public" host), 198.51.100.10 (an allowCidrs
// target) and 169.254.77.77 (a stand-in for the cloud metadata address), each
// routed from the host into the namespace by a /32 route through the veth.
//
// Listeners run inside the namespace (Net.Listen, Net.ListenPacket: a socket keeps
// the namespace it was created in) and are served by the test process itself:
// ServeBanner, ServeUDPEcho, ServeHTTPS.
//
// Before a test sends a packet to a target it calls Net.CheckRoute (the host's view)
// or Net.CheckRouteFrom (a pod's view: the node routes pod traffic in from its pod
// bridge): `ip route get` must resolve the target to the namespace's own veth, else
// the check fails and the test sends nothing. 169.254.169.254 is refused as an
// address: the machine's real metadata service answers there.
//
// Pod traffic to the namespace is routed by the host, which needs IPv4 forwarding on
// the interfaces it comes in by (the pod bridge, and the veth for the replies).
// Net.Forward turns it on for named interfaces only and Close restores what it
// changed. Close removes the namespace, and with it the veth pair and its routes.
// Needs root, Linux and iproute2.
package testnet
