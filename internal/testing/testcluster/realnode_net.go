package testcluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// ServiceCIDR is the cluster's Service range (kube-apiserver
// --service-cluster-ip-range), on kwok and on the real node alike: a /20, 4,094
// ClusterIPs, so that a fleet of 1,000 tenants with a Service each, and the
// tests beside it, fit (a /24 ran out at 254). On the real node, kube-proxy
// routes its ClusterIPs.
const ServiceCIDR = "10.0.0.0/20"

// nodeNet runs the real node's network programs: kube-proxy (iptables mode) from
// the start to the stop of the node, and kube-router's firewall controller, the
// NetworkPolicy enforcer, while it is switched on.
type nodeNet struct {
	binDir, kubeconfig, logDir string
	name, nodeIP, podSubnet    string
	tools                      netTools

	mu         sync.Mutex
	kubeProxy  *component
	kubeRouter *component
}

// kubeProxyArgs starts kube-proxy in iptables mode for the node's pods: conntrack
// and sysctl settings are left as they are (root here may not write them), NodePorts
// only on the node IP (no route_localnet), health and metrics on loopback.
func (nn *nodeNet) kubeProxyArgs(healthPort, metricsPort int) []string {
	return []string{
		"--kubeconfig=" + nn.kubeconfig,
		"--hostname-override=" + nn.name,
		"--proxy-mode=iptables",
		"--cluster-cidr=" + nn.podSubnet,
		"--nodeport-addresses=" + nn.nodeIP + "/32",
		"--iptables-localhost-nodeports=false",
		"--iptables-min-sync-period=0s",
		"--conntrack-max-per-core=0",
		"--conntrack-min=0",
		"--conntrack-tcp-timeout-established=0s",
		"--conntrack-tcp-timeout-close-wait=0s",
		"--conntrack-udp-timeout=0s",
		"--conntrack-udp-timeout-stream=0s",
		"--healthz-bind-address=127.0.0.1:" + strconv.Itoa(healthPort),
		"--metrics-bind-address=127.0.0.1:" + strconv.Itoa(metricsPort),
	}
}

// kubeRouterArgs starts only kube-router's firewall controller: no router (GoBGP),
// no service proxy, no CNI, no IPv6; the advisories against v2.1.0 are in the two
// parts that stay off. No health or metrics listener (they would bind 0.0.0.0).
func (nn *nodeNet) kubeRouterArgs() []string {
	return []string{
		"--kubeconfig=" + nn.kubeconfig,
		"--hostname-override=" + nn.name,
		"--run-firewall=true",
		"--run-router=false",
		"--run-service-proxy=false",
		"--run-loadbalancer=false",
		"--enable-cni=false",
		"--enable-ipv6=false",
		"--service-cluster-ip-range=" + ServiceCIDR,
		"--health-port=0",
		"--metrics-port=0",
		"--v=1",
	}
}

// start starts kube-proxy and, with policy, kube-router, and waits until their
// chains are in place.
func (nn *nodeNet) start(ctx context.Context, policy bool) error {
	pt, err := freePorts(2)
	if err != nil {
		return fmt.Errorf("kube-proxy: %w", err)
	}
	kp, err := startComponent("kube-proxy", filepath.Join(nn.binDir, "kube-proxy"), nn.kubeProxyArgs(pt[0], pt[1]), nn.logDir, nil)
	if err != nil {
		return err
	}
	nn.mu.Lock()
	nn.kubeProxy = kp
	nn.mu.Unlock()
	if err := nn.waitChain(ctx, kp, "nat", "KUBE-SERVICES"); err != nil {
		return fmt.Errorf("kube-proxy: %w", kp.failure(err))
	}
	if policy {
		return nn.startRouter(ctx)
	}
	return nil
}

// startRouter starts kube-router (once) and waits until it filters forwarded traffic.
func (nn *nodeNet) startRouter(ctx context.Context) error {
	nn.mu.Lock()
	defer nn.mu.Unlock()
	if nn.kubeRouter != nil && !nn.kubeRouter.exited() {
		return nil
	}
	kr, err := startComponent("kube-router", filepath.Join(nn.binDir, "kube-router"), nn.kubeRouterArgs(), nn.logDir, nil)
	if err != nil {
		return err
	}
	nn.kubeRouter = kr
	if err := nn.waitChain(ctx, kr, "filter", "KUBE-ROUTER-FORWARD"); err != nil {
		return fmt.Errorf("kube-router: %w", kr.failure(err))
	}
	return nil
}

// stopRouter stops kube-router and removes its chains and ipsets
// (cleanupKubeRouter): the node stops enforcing.
func (nn *nodeNet) stopRouter(ctx context.Context, grace time.Duration) error {
	nn.mu.Lock()
	defer nn.mu.Unlock()
	var errs []error
	if nn.kubeRouter != nil {
		if err := nn.kubeRouter.stop(grace); err != nil && !nn.kubeRouter.exited() {
			errs = append(errs, err)
		}
		nn.kubeRouter = nil
	}
	if err := cleanupKubeRouter(ctx, nn.tools); err != nil {
		errs = append(errs, err)
	}
	for _, prefix := range kubeRouterChainPrefixes {
		if err := nn.checkNoChain(ctx, prefix); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// stop stops both programs and removes their rules.
func (nn *nodeNet) stop(ctx context.Context, grace time.Duration) error {
	errs := []error{nn.stopRouter(ctx, grace)}
	nn.mu.Lock()
	defer nn.mu.Unlock()
	if nn.kubeProxy != nil {
		if err := nn.kubeProxy.stop(grace); err != nil && !nn.kubeProxy.exited() {
			errs = append(errs, err)
		}
		nn.kubeProxy = nil
	}
	if err := cleanupKubeProxy(ctx, nn.binDir); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// enforcing reports whether kube-router runs.
func (nn *nodeNet) enforcing() bool {
	nn.mu.Lock()
	defer nn.mu.Unlock()
	return nn.kubeRouter != nil && !nn.kubeRouter.exited()
}

// components returns the running programs (for ResidentMemory and PIDs).
func (nn *nodeNet) components() []*component {
	nn.mu.Lock()
	defer nn.mu.Unlock()
	var out []*component
	for _, c := range []*component{nn.kubeProxy, nn.kubeRouter} {
		if c != nil {
			out = append(out, c)
		}
	}
	return out
}

// waitChain waits until table holds a chain named chain (iptables-save), or comp exits.
func (nn *nodeNet) waitChain(ctx context.Context, comp *component, table, chain string) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	return poll(ctx, comp, 100*time.Millisecond, func(ctx context.Context) (bool, string, error) {
		rules, err := iptablesSave(ctx, nn.tools.iptablesSave, table)
		if err != nil {
			return false, err.Error(), nil
		}
		if !strings.Contains(rules, ":"+chain+" ") {
			return false, "no chain " + chain + " in table " + table, nil
		}
		return true, "", nil
	})
}

// checkNoChain fails if the filter table still holds a chain whose name has prefix.
func (nn *nodeNet) checkNoChain(ctx context.Context, prefix string) error {
	rules, err := iptablesSave(ctx, nn.tools.iptablesSave, "filter")
	if err != nil {
		return err
	}
	for _, line := range strings.Split(rules, "\n") {
		if strings.HasPrefix(line, ":"+prefix) {
			return fmt.Errorf("chain %s left after cleanup", strings.Fields(line[1:])[0])
		}
	}
	return nil
}

// iptablesSave returns `iptables-save -t table`.
func iptablesSave(ctx context.Context, bin, table string) (string, error) {
	out, err := exec.CommandContext(ctx, bin, "-t", table).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return "", fmt.Errorf("iptables-save -t %s: %w: %s", table, err, strings.TrimSpace(string(ee.Stderr)))
		}
		return "", fmt.Errorf("iptables-save -t %s: %w", table, err)
	}
	return string(out), nil
}

// cleanupKubeProxy runs `kube-proxy --cleanup`, which removes its chains, if the
// binary exists.
func cleanupKubeProxy(ctx context.Context, binDir string) error {
	bin := filepath.Join(binDir, "kube-proxy")
	if _, err := os.Stat(bin); err != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "--cleanup").CombinedOutput()
	if err != nil {
		return fmt.Errorf("kube-proxy --cleanup: %w: %s", err, LastLines(string(out), 10))
	}
	return nil
}

// LastLines returns the last n lines of s.
func LastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// firewalled reports whether kube-router has put the pod's egress or ingress
// behind its own firewall chain (it does so for pods some NetworkPolicy selects).
func (nn *nodeNet) firewalled(ctx context.Context, namespace, name string) (bool, error) {
	rules, err := iptablesSave(ctx, nn.tools.iptablesSave, "filter")
	if err != nil {
		return false, err
	}
	pod := "POD name:" + name + " namespace: " + namespace + " to chain "
	return strings.Contains(rules, "rule to jump traffic from "+pod) ||
		strings.Contains(rules, "rule to jump traffic destined to "+pod), nil
}

// ipForwardFile is where the node's directory keeps the host's net.ipv4.ip_forward
// as it was before the node started: the CNI bridge plugin (isGateway) sets it to 1
// with the first pod, and the stop (or a later start's sweep) sets it back.
const ipForwardFile = "ip_forward.orig"

// ipForwardPath is the sysctl itself.
const ipForwardPath = "/proc/sys/net/ipv4/ip_forward"

// saveIPForward records the host's ip_forward in dir.
func saveIPForward(dir string) error {
	v, err := os.ReadFile(ipForwardPath)
	if err != nil {
		return fmt.Errorf("ip_forward: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, ipForwardFile), v, 0o644); err != nil {
		return fmt.Errorf("ip_forward: %w", err)
	}
	return nil
}

// restoreIPForward sets the host's ip_forward back to what dir recorded, if it did.
func restoreIPForward(dir string) error {
	v, err := os.ReadFile(filepath.Join(dir, ipForwardFile))
	if err != nil {
		return nil
	}
	cur, _ := os.ReadFile(ipForwardPath)
	if strings.TrimSpace(string(cur)) == strings.TrimSpace(string(v)) {
		return nil
	}
	if err := os.WriteFile(ipForwardPath, v, 0o644); err != nil {
		return fmt.Errorf("ip_forward: restore %s: %w", strings.TrimSpace(string(v)), err)
	}
	return nil
}

// kubeProxyChains are the marks of kube-proxy's chains in iptables-save's output.
var kubeProxyChains = []string{":KUBE-SERVICES ", ":KUBE-PROXY-", ":KUBE-SVC-", ":KUBE-SEP-", ":KUBE-FORWARD "}

// sweepNodeNet removes what kube-router and kube-proxy leave when a run crashed
// (kube-router's chains and ipsets; kube-proxy's chains, with `kube-proxy --cleanup`
// if they are there) and restores ip_forward as dirs recorded it.
func sweepNodeNet(tools netTools, binDir string, dirs []string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var errs []error
	if err := cleanupKubeRouter(ctx, tools); err != nil {
		errs = append(errs, err)
	}
	var rules string
	for _, table := range []string{"filter", "nat"} {
		r, err := iptablesSave(ctx, tools.iptablesSave, table)
		if err != nil {
			errs = append(errs, err)
		}
		rules += r
	}
	if hasAnyMark(rules, kubeProxyChains) {
		if err := cleanupKubeProxy(ctx, binDir); err != nil {
			errs = append(errs, err)
		}
	}
	if err := cleanupKubeletChains(ctx, tools); err != nil {
		errs = append(errs, err)
	}
	if err := removeUplinkGuard(ctx, tools); err != nil {
		errs = append(errs, err)
	}
	for _, d := range dirs {
		if err := restoreIPForward(d); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// hasAnyMark reports whether s contains one of marks.
func hasAnyMark(s string, marks []string) bool {
	for _, m := range marks {
		if strings.Contains(s, m) {
			return true
		}
	}
	return false
}

// routeServiceCIDR routes the Service range to the node bridge, which has no ports:
// a packet to a Service IP that kube-proxy did not translate (no such Service, or
// one that kube-router accepts before kube-proxy's REJECT) goes nowhere instead of
// following the default route out of the machine. Translated packets are routed to
// their pod (PREROUTING, and OUTPUT for the host's own, come before the route). The
// route goes with the bridge when the node is swept.
func routeServiceCIDR(ipBin string) error {
	args := []string{"route", "replace", ServiceCIDR, "dev", nodeBridge}
	if out, err := exec.Command(ipBin, args...).CombinedOutput(); err != nil {
		return fmt.Errorf("service range: ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}
