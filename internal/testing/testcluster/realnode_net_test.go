package testcluster

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestKubeRouterCleanupScript(t *testing.T) {
	tests := []struct {
		name, save, want string
	}{
		{name: "nothing of kube-router", save: "*filter\n:INPUT ACCEPT [0:0]\n:KUBE-FORWARD - [0:0]\n-A FORWARD -j KUBE-FORWARD\nCOMMIT\n", want: ""},
		{
			name: "jumps, own chains and others' rules",
			save: strings.Join([]string{
				"*filter",
				":INPUT ACCEPT [0:0]",
				":FORWARD ACCEPT [0:0]",
				":KUBE-FORWARD - [0:0]",
				":KUBE-POD-FW-ABC - [0:0]",
				":KUBE-ROUTER-FORWARD - [0:0]",
				":KUBE-ROUTER-INPUT - [0:0]",
				`-A INPUT -m comment --comment "kube-router netpol - 4IA2OSFRMVNDXBVV" -j KUBE-ROUTER-INPUT`,
				"-A FORWARD -j KUBE-FORWARD",
				`-A FORWARD -m comment --comment "kube-router netpol - TEMCG2JMHZYE7H7T" -j KUBE-ROUTER-FORWARD`,
				`-A KUBE-ROUTER-FORWARD -m comment --comment "rule to jump traffic from POD name:a namespace: b to chain KUBE-POD-FW-ABC" -s 10.201.0.5/32 -j KUBE-POD-FW-ABC`,
				"-A KUBE-POD-FW-ABC -j REJECT --reject-with icmp-port-unreachable",
				"COMMIT",
			}, "\n"),
			want: strings.Join([]string{
				"*filter",
				":KUBE-POD-FW-ABC - [0:0]",
				":KUBE-ROUTER-FORWARD - [0:0]",
				":KUBE-ROUTER-INPUT - [0:0]",
				`-D INPUT -m comment --comment "kube-router netpol - 4IA2OSFRMVNDXBVV" -j KUBE-ROUTER-INPUT`,
				`-D FORWARD -m comment --comment "kube-router netpol - TEMCG2JMHZYE7H7T" -j KUBE-ROUTER-FORWARD`,
				"-X KUBE-POD-FW-ABC",
				"-X KUBE-ROUTER-FORWARD",
				"-X KUBE-ROUTER-INPUT",
				"COMMIT",
				"",
			}, "\n"),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, chainCleanupScript("filter", tt.save, kubeRouterChainPrefixes)); diff != "" {
				t.Errorf("script (-want +got):\n%s", diff)
			}
		})
	}
}

func TestExactNames(t *testing.T) {
	save := ":KUBE-FIREWALL - [0:0]\n:KUBE-FIREWALL-X - [0:0]\n:KUBE-KUBELET-CANARY - [0:0]\n-A INPUT -j KUBE-FIREWALL\n"
	got := exactNames(save, []string{"KUBE-FIREWALL", "KUBE-KUBELET-CANARY", "KUBE-IPTABLES-HINT"})
	// KUBE-FIREWALL prefixes another chain: removing it by prefix would take that one too.
	want := []string{"KUBE-KUBELET-CANARY", "KUBE-IPTABLES-HINT"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("exactNames (-want +got):\n%s", diff)
	}
}

func TestRouteDevice(t *testing.T) {
	for line, want := range map[string]string{
		"default via 192.0.2.1 dev eth0 proto static": "eth0",
		"default dev ppp0 scope link":                 "ppp0",
		"":                                            "",
	} {
		if got := routeDevice(line); got != want {
			t.Errorf("routeDevice(%q) = %q, want %q", line, got, want)
		}
	}
}
