package testcluster

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
)

// kube-router's marks: its chains (filter table) and its NetworkPolicy ipsets.
var (
	kubeRouterChainPrefixes = []string{"KUBE-ROUTER-", "KUBE-POD-FW-", "KUBE-NWPLCY-"}
	kubeRouterSetPrefixes   = []string{"KUBE-SRC-", "KUBE-DST-", "inet6:KUBE-SRC-", "inet6:KUBE-DST-"}
)

// netTools are the host programs that remove kube-router's rules.
type netTools struct {
	iptables, iptablesSave, iptablesRestore, ipset string
}

// findNetTools finds iptables-save, iptables-restore and ipset (in PATH, /usr/sbin
// or /sbin), naming what is missing.
func findNetTools() (netTools, error) {
	var t netTools
	var missing []string
	for name, dst := range map[string]*string{"iptables": &t.iptables, "iptables-save": &t.iptablesSave,
		"iptables-restore": &t.iptablesRestore, "ipset": &t.ipset} {
		for _, p := range []string{name, filepath.Join("/usr/sbin", name), filepath.Join("/sbin", name)} {
			if bin, err := exec.LookPath(p); err == nil {
				*dst = bin
				break
			}
		}
		if *dst == "" {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		return t, fmt.Errorf("%s (not in PATH; apt-get install iptables ipset)", strings.Join(missing, ", "))
	}
	return t, nil
}

// cleanupKubeRouter removes kube-router's NetworkPolicy rules from the host: the
// rules of other chains that jump to its chains, its chains, then its ipsets. It
// stands in for `kube-router --cleanup-config`, which in v2.1.0 cleans no iptables
// rule (its NetworkPolicy controller is an empty value there, with no iptables
// handler) and then panics in the service proxy's cleanup (a nil pointer in
// deleteHairpinIptablesRules), before it reaches the ipsets.
func cleanupKubeRouter(ctx context.Context, t netTools) error {
	rules, err := iptablesSave(ctx, t.iptablesSave, "filter")
	if err != nil {
		return err
	}
	script := chainCleanupScript("filter", rules, kubeRouterChainPrefixes)
	if script != "" {
		cmd := exec.CommandContext(ctx, t.iptablesRestore, "--noflush", "-w", "5")
		cmd.Stdin = strings.NewReader(script)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("kube-router cleanup: iptables-restore: %w: %s\n--- script ---\n%s", err, strings.TrimSpace(string(out)), script)
		}
	}
	out, err := exec.CommandContext(ctx, t.ipset, "list", "-n").Output()
	if err != nil {
		return fmt.Errorf("kube-router cleanup: ipset list: %w", err)
	}
	var errs []error
	for _, name := range strings.Fields(string(out)) {
		if !hasAnyPrefix(name, kubeRouterSetPrefixes) {
			continue
		}
		if out, err := exec.CommandContext(ctx, t.ipset, "destroy", name).CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("kube-router cleanup: ipset destroy %s: %w: %s", name, err, strings.TrimSpace(string(out))))
		}
	}
	return errors.Join(errs...)
}

// chainCleanupScript is the iptables-restore --noflush input that deletes, from
// `iptables-save -t table` output, every rule of another chain jumping to a chain
// whose name has one of prefixes, then flushes and deletes those chains ("" if
// there are none).
func chainCleanupScript(table, save string, prefixes []string) string {
	var chains, deletes []string
	for _, line := range strings.Split(save, "\n") {
		switch {
		case strings.HasPrefix(line, ":"):
			name := strings.Fields(line[1:])[0]
			if hasAnyPrefix(name, prefixes) {
				chains = append(chains, name)
			}
		case strings.HasPrefix(line, "-A "):
			f := strings.Fields(line)
			if len(f) < 2 || hasAnyPrefix(f[1], prefixes) {
				continue // a rule of one of the chains goes with the chain
			}
			if target := jumpTarget(f); target != "" && hasAnyPrefix(target, prefixes) {
				deletes = append(deletes, "-D"+strings.TrimPrefix(line, "-A"))
			}
		}
	}
	if len(chains) == 0 && len(deletes) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("*" + table + "\n")
	for _, c := range chains {
		fmt.Fprintf(&b, ":%s - [0:0]\n", c) // with --noflush, declaring a chain flushes it
	}
	for _, d := range deletes {
		b.WriteString(d + "\n")
	}
	for _, c := range chains {
		fmt.Fprintf(&b, "-X %s\n", c)
	}
	b.WriteString("COMMIT\n")
	return b.String()
}

// jumpTarget returns the chain after -j (or -g) in a rule's fields.
func jumpTarget(f []string) string {
	for i := 0; i+1 < len(f); i++ {
		if f[i] == "-j" || f[i] == "-g" {
			return f[i+1]
		}
	}
	return ""
}

func hasAnyPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

// kubeletChains are the chains the kubelet leaves in iptables, by table: its
// canaries, the iptables-mode hint and KUBE-FIREWALL (which drops packets to
// 127.0.0.0/8 from elsewhere). A stopped node removes them with kube-proxy's.
var kubeletChains = map[string][]string{
	"filter": {"KUBE-FIREWALL", "KUBE-KUBELET-CANARY"},
	"nat":    {"KUBE-KUBELET-CANARY"},
	"mangle": {"KUBE-KUBELET-CANARY", "KUBE-IPTABLES-HINT"},
}

// cleanupKubeletChains removes kubeletChains (exact names) from the host.
func cleanupKubeletChains(ctx context.Context, t netTools) error {
	var errs []error
	for _, table := range []string{"filter", "nat", "mangle"} {
		rules, err := iptablesSave(ctx, t.iptablesSave, table)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		script := chainCleanupScript(table, rules, exactNames(rules, kubeletChains[table]))
		if script == "" {
			continue
		}
		cmd := exec.CommandContext(ctx, t.iptablesRestore, "--noflush", "-w", "5")
		cmd.Stdin = strings.NewReader(script)
		if out, err := cmd.CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("kubelet chains: iptables-restore: %w: %s", err, strings.TrimSpace(string(out))))
		}
	}
	return errors.Join(errs...)
}

// exactNames returns those of names that are chains of save, each as a prefix that
// matches only itself (a space-free name followed by nothing): chainCleanupScript
// matches by prefix, so a name that prefixes another chain is left out.
func exactNames(save string, names []string) []string {
	var chains []string
	for _, line := range strings.Split(save, "\n") {
		if strings.HasPrefix(line, ":") {
			chains = append(chains, strings.Fields(line[1:])[0])
		}
	}
	var out []string
	for _, n := range names {
		unique := true
		for _, c := range chains {
			if c != n && strings.HasPrefix(c, n) {
				unique = false
			}
		}
		if unique {
			out = append(out, n)
		}
	}
	return out
}

// leakComment marks the rules that keep the node's pods from routing out of the
// machine (guardUplinks).
const leakComment = "pcsync real node: no pod traffic leaves the machine"

// guardUplinks drops, in mangle FORWARD (before any filter rule, so before
// kube-router's ACCEPTs), every packet from the pod bridge to an interface of a
// default route. The CNI bridge plugin turns on net.ipv4.ip_forward with the first
// pod, and pods are not masqueraded: without this, a pod's packet to an address
// that is not on the machine would leave by the uplink.
func guardUplinks(ctx context.Context, ipBin string, t netTools) error {
	out, err := exec.CommandContext(ctx, ipBin, "-o", "-4", "route", "show", "default").Output()
	if err != nil {
		return fmt.Errorf("uplink guard: ip route show default: %w", err)
	}
	seen := map[string]bool{}
	for _, line := range strings.Split(string(out), "\n") {
		dev := routeDevice(line)
		if dev == "" || dev == podBridge || seen[dev] {
			continue
		}
		seen[dev] = true
		args := []string{"-w", "5", "-t", "mangle", "-I", "FORWARD", "-i", podBridge, "-o", dev,
			"-m", "comment", "--comment", leakComment, "-j", "DROP"}
		if out, err := exec.CommandContext(ctx, t.iptables, args...).CombinedOutput(); err != nil {
			return fmt.Errorf("uplink guard: iptables %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
		}
	}
	return nil
}

// removeUplinkGuard deletes the rules guardUplinks made.
func removeUplinkGuard(ctx context.Context, t netTools) error {
	rules, err := iptablesSave(ctx, t.iptablesSave, "mangle")
	if err != nil {
		return err
	}
	var dels []string
	for _, line := range strings.Split(rules, "\n") {
		if strings.HasPrefix(line, "-A ") && strings.Contains(line, leakComment) {
			dels = append(dels, "-D"+strings.TrimPrefix(line, "-A"))
		}
	}
	if len(dels) == 0 {
		return nil
	}
	cmd := exec.CommandContext(ctx, t.iptablesRestore, "--noflush", "-w", "5")
	cmd.Stdin = strings.NewReader("*mangle\n" + strings.Join(dels, "\n") + "\nCOMMIT\n")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("uplink guard: iptables-restore: %w: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}

// routeDevice returns the word after "dev" in a line of `ip route` output.
func routeDevice(line string) string {
	f := strings.Fields(line)
	for i := 0; i+1 < len(f); i++ {
		if f[i] == "dev" {
			return f[i+1]
		}
	}
	return ""
}
