package testnet

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// forwardingPath is the IPv4 forwarding switch of one interface. The kernel decides
// by the interface a packet comes in by, so turning it on for the pod bridge and the
// namespace's veth routes pods ↔ namespace without turning on net.ipv4.ip_forward
// (which would switch it on for every interface, the machine's uplink included).
func forwardingPath(iface string) string {
	return filepath.Join("/proc/sys/net/ipv4/conf", iface, "forwarding")
}

// Forward turns IPv4 forwarding on for the namespace's host veth and for each of
// ifaces (e.g. the real node's pod bridge, testcluster.RealNode.PodBridge), so that
// the host routes their traffic to the namespace and the replies back. Close sets
// back what it changed (an interface deleted meanwhile is skipped).
func (n *Net) Forward(ifaces ...string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, iface := range append([]string{n.hostLink}, ifaces...) {
		p := forwardingPath(iface)
		cur, err := os.ReadFile(p)
		if err != nil {
			return fmt.Errorf("testnet %s: forwarding on %s: %w", n.opts.Name, iface, err)
		}
		if strings.TrimSpace(string(cur)) == "1" {
			continue
		}
		if _, seen := n.forward[iface]; !seen {
			n.forward[iface] = string(cur)
		}
		if err := os.WriteFile(p, []byte("1\n"), 0o644); err != nil {
			return fmt.Errorf("testnet %s: forwarding on %s: %w", n.opts.Name, iface, err)
		}
	}
	return nil
}

// restoreForward sets back the forwarding values Forward changed.
func (n *Net) restoreForward() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	var errs []error
	for iface, v := range n.forward {
		p := forwardingPath(iface)
		if _, err := os.Stat(p); err != nil {
			continue // the interface is gone
		}
		if err := os.WriteFile(p, []byte(v), 0o644); err != nil {
			errs = append(errs, fmt.Errorf("testnet %s: restore forwarding on %s: %w", n.opts.Name, iface, err))
		}
	}
	n.forward = map[string]string{}
	return errors.Join(errs...)
}
