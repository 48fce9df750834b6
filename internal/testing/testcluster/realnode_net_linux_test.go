//go:build integration && linux

package testcluster

import (
	"context"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// inNewNetns runs f on a thread in a new network namespace: iptables rules and
// ipsets are per namespace, so programs f runs (forked from that thread) touch
// nothing of the host's (another test's real node may be running). The thread is
// left locked, so that the Go runtime ends it afterwards.
func inNewNetns(t *testing.T, f func()) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("needs root (a network namespace, iptables)")
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread() // never unlocked: the thread dies with the goroutine
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			t.Errorf("unshare: %v", err)
			return
		}
		f()
	}()
	<-done
}

// The crash sweep's removal of what the real node's network programs leave:
// kube-router's chains (jumped to from the built-in chains) and ipsets, the
// kubelet's chains, and the uplink guard, in a network namespace of the test's own.
func TestNodeNetCleanup(t *testing.T) {
	tools, err := findNetTools()
	if err != nil {
		t.Fatal(err)
	}
	ipBin, err := exec.LookPath("ip")
	if err != nil {
		t.Fatal(err)
	}
	inNewNetns(t, func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		run := func(stdin string, name string, args ...string) {
			cmd := exec.CommandContext(ctx, name, args...)
			cmd.Stdin = strings.NewReader(stdin)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("%s %v: %v: %s", name, args, err, out)
			}
		}
		// What a node leaves: kube-router's, the kubelet's, the guard.
		run("", ipBin, "link", "add", "up0", "type", "veth", "peer", "name", "up1")
		run("", ipBin, "link", "set", "up0", "up")
		run("", ipBin, "addr", "add", "192.0.2.10/24", "dev", "up0")
		run("", ipBin, "route", "add", "default", "via", "192.0.2.1", "dev", "up0")
		run("", tools.ipset, "create", "KUBE-SRC-TESTSET", "hash:ip")
		run("", tools.ipset, "create", "unrelated-set", "hash:ip")
		run(strings.Join([]string{
			"*filter",
			":KUBE-ROUTER-FORWARD - [0:0]",
			":KUBE-POD-FW-ABC - [0:0]",
			":KUBE-FIREWALL - [0:0]",
			":KUBE-KUBELET-CANARY - [0:0]",
			":OTHER - [0:0]",
			`-A FORWARD -m comment --comment "kube-router netpol - X" -j KUBE-ROUTER-FORWARD`,
			"-A FORWARD -j OTHER",
			"-A INPUT -j KUBE-FIREWALL",
			"-A KUBE-ROUTER-FORWARD -s 10.201.0.5/32 -j KUBE-POD-FW-ABC",
			"-A KUBE-POD-FW-ABC -m set --match-set KUBE-SRC-TESTSET src -j ACCEPT",
			"-A KUBE-POD-FW-ABC -j REJECT",
			"-A OTHER -j ACCEPT",
			"COMMIT",
			"*mangle",
			":KUBE-IPTABLES-HINT - [0:0]",
			"COMMIT",
			"",
		}, "\n"), tools.iptablesRestore, "--noflush")
		if err := guardUplinks(ctx, ipBin, tools); err != nil {
			t.Fatal(err)
		}
		mangle, _ := iptablesSave(ctx, tools.iptablesSave, "mangle")
		if !strings.Contains(mangle, "-A FORWARD -i "+podBridge+" -o up0 ") || !strings.Contains(mangle, "-j DROP") {
			t.Errorf("guard: mangle table without the drop to up0:\n%s", mangle)
		}

		if err := cleanupKubeRouter(ctx, tools); err != nil {
			t.Fatal(err)
		}
		if err := cleanupKubeletChains(ctx, tools); err != nil {
			t.Fatal(err)
		}
		if err := removeUplinkGuard(ctx, tools); err != nil {
			t.Fatal(err)
		}
		var all string
		for _, table := range []string{"filter", "nat", "mangle"} {
			r, err := iptablesSave(ctx, tools.iptablesSave, table)
			if err != nil {
				t.Fatal(err)
			}
			all += r
		}
		for _, gone := range []string{"KUBE-", leakComment} {
			if strings.Contains(all, gone) {
				t.Errorf("%q left after the cleanup:\n%s", gone, all)
			}
		}
		if !strings.Contains(all, "-A FORWARD -j OTHER") || !strings.Contains(all, "-A OTHER -j ACCEPT") {
			t.Errorf("the cleanup removed another program's rules:\n%s", all)
		}
		sets, _ := exec.CommandContext(ctx, tools.ipset, "list", "-n").Output()
		if got := strings.Fields(string(sets)); len(got) != 1 || got[0] != "unrelated-set" {
			t.Errorf("ipsets after the cleanup: %v, want only unrelated-set", got)
		}
	})
}
