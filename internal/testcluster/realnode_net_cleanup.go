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
	iptablesSave, iptablesRestore, ipset string
}

// findNetTools finds iptables-save, iptables-restore and ipset (in PATH, /usr/sbin
// or /sbin), naming what is missing.
func findNetTools() (netTools, error) {
	var t netTools
	var missing []string
	for name, dst := range map[string]*string{"iptables-save": &t.iptablesSave, "iptables-restore": &t.iptablesRestore, "ipset": &t.ipset} {
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
	script := kubeRouterCleanupScript(rules)
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

// kubeRouterCleanupScript is the iptables-restore --noflush input that deletes, from
// `iptables-save -t filter` output, every rule of another chain jumping to one of
// kube-router's chains, then flushes and deletes those chains ("" if there are none).
func kubeRouterCleanupScript(save string) string {
	var chains, deletes []string
	for _, line := range strings.Split(save, "\n") {
		switch {
		case strings.HasPrefix(line, ":"):
			name := strings.Fields(line[1:])[0]
			if hasAnyPrefix(name, kubeRouterChainPrefixes) {
				chains = append(chains, name)
			}
		case strings.HasPrefix(line, "-A "):
			f := strings.Fields(line)
			if len(f) < 2 || hasAnyPrefix(f[1], kubeRouterChainPrefixes) {
				continue // a rule of one of its own chains goes with the chain
			}
			if target := jumpTarget(f); target != "" && hasAnyPrefix(target, kubeRouterChainPrefixes) {
				deletes = append(deletes, "-D"+strings.TrimPrefix(line, "-A"))
			}
		}
	}
	if len(chains) == 0 && len(deletes) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("*filter\n")
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
