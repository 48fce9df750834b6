package testnet

import (
	"context"
	"fmt"
	"net/netip"
	"os/exec"
	"strings"
)

// CheckRoute fails unless target is one of the namespace's addresses and the host
// routes it through the namespace's veth (`ip route get TARGET`). A test calls it
// before it sends anything from the host to target, and sends nothing if it fails.
func (n *Net) CheckRoute(ctx context.Context, target string) error {
	return n.checkRoute(ctx, target, "ip", "-o", "route", "get", target)
}

// CheckRouteFrom is CheckRoute for traffic the host routes on behalf of another
// address, such as a pod's: `ip route get TARGET from SRC iif IIF` (IIF the pod
// bridge the packet comes in by). It also fails when IIF does not forward (Forward).
func (n *Net) CheckRouteFrom(ctx context.Context, target, src, iif string) error {
	return n.checkRoute(ctx, target, "ip", "-o", "route", "get", target, "from", src, "iif", iif)
}

// CheckRoutes is CheckRoute for each target, the first error wins.
func (n *Net) CheckRoutes(ctx context.Context, targets ...string) error {
	for _, t := range targets {
		if err := n.CheckRoute(ctx, t); err != nil {
			return err
		}
	}
	return nil
}

func (n *Net) checkRoute(ctx context.Context, target string, argv ...string) error {
	a, err := netip.ParseAddr(target)
	if err != nil {
		return fmt.Errorf("testnet %s: route to %q: not an IP address", n.opts.Name, target)
	}
	owned := false
	for _, b := range n.addrs {
		owned = owned || a == b
	}
	if !owned {
		return fmt.Errorf("testnet %s: route to %s: not an address of this namespace (%v): refusing to send there", n.opts.Name, target, n.Addrs())
	}
	out, err := exec.CommandContext(ctx, n.ipBin, argv[1:]...).CombinedOutput()
	line := strings.TrimSpace(string(out))
	if err != nil {
		return fmt.Errorf("testnet %s: `%s`: %w: %s: refusing to send to %s", n.opts.Name, strings.Join(argv, " "), err, line, target)
	}
	if dev := routeDev(line); dev != n.hostLink {
		return fmt.Errorf("testnet %s: `%s` resolves to device %q, not the namespace's veth %s (%s): refusing to send to %s",
			n.opts.Name, strings.Join(argv, " "), dev, n.hostLink, line, target)
	}
	return nil
}

// routeDev returns the word after "dev" in `ip -o route get` output.
func routeDev(line string) string {
	f := strings.Fields(line)
	for i := 0; i+1 < len(f); i++ {
		if f[i] == "dev" {
			return f[i+1]
		}
	}
	return ""
}
