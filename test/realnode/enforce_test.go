//go:build integration

package realnode

import (
	"context"
	"fmt"
	"net"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pcsync/pcsync/pkg/config"
	"github.com/pcsync/pcsync/pkg/render"
)

// enforceCase is what one prober may reach with the enforcer on: every target not
// in allowed must be refused. publicHTTPS adds public-443 when the prober's tenant
// has standard mode's rule for any public IPv4 address on TCP 443 (rendered when
// its agents want host names: claude_local's adapter does).
type enforceCase struct {
	prober      string
	allowed     []string
	publicHTTPS string // the namespace whose egress-allow policy decides it ("a", "b")
}

// nonTenantTargets are the targets outside the tenants: a pod in a namespace
// without policies reaches them all.
var nonTenantTargets = []string{"public-443", "public-80", "allowed-cidr", "metadata-80", "metadata-443",
	"dns-udp", "dns-tcp", "server", "server-other-port", "node-kubelet", "apiserver"}

// standardCases is the matrix of egress mode standard with an allowCidrs entry for
// 198.51.100.0/24: agents (a Job's pod, a lease pod) reach DNS, the server's port,
// the allowed range and, with the any-public-443 rule, a public address on 443;
// a warm pool member reaches nothing, DNS included; another tenant's agent does not
// reach tenant a's pods (ingress); a pod without policies reaches everything but
// the tenants' pods (their deny-all ingress). Another mode adds its own table (and
// targets) beside this one.
var standardCases = []enforceCase{
	{prober: "job", allowed: []string{"dns-udp", "dns-tcp", "server", "allowed-cidr"}, publicHTTPS: "a"},
	{prober: "lease", allowed: []string{"dns-udp", "dns-tcp", "server", "allowed-cidr"}, publicHTTPS: "a"},
	{prober: "pool-member", allowed: nil},
	{prober: "tenant-b-agent", allowed: []string{"dns-udp", "dns-tcp", "server"}, publicHTTPS: "b"},
	{prober: "control", allowed: nonTenantTargets},
}

// TestNetworkPolicyEnforced proves, on the real node with kube-router enforcing,
// what a tenant rendered and applied by pcsync in egress mode standard isolates.
// Control first: with the enforcer stopped every prober reaches every target, so
// that each refusal below means the policy. Then, enforcing: each prober reaches
// exactly its allowed targets, and is refused (kube-router's REJECT) the others:
// another tenant's pods, the server's other port, the node's kubelet port, the API
// server as pods reach it, the metadata stand-in (169.254.77.77, on 80 and 443) and
// a public address (203.0.113.10) on a port the company does not allow. In this
// mode a company whose agents want host names reaches any public address on 443
// (asserted as it is: the hole the proxy mode closes). Targets off the node live in
// a network namespace the test made, checked by `ip route get` before any packet.
func TestNetworkPolicyEnforced(t *testing.T) {
	runEnforceMatrix(t, string(config.EgressStandard), standardCases)
}

// runEnforceMatrix builds the world in egress mode mode and checks cases.
func runEnforceMatrix(t *testing.T, mode string, cases []enforceCase) {
	e := newEnfEnv(t, mode)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	control, other := e.controlProbers(ctx, t)
	m := e.manager(t)
	lease := e.leaseProber(ctx, t, m)
	member := e.memberProber(ctx, t)
	job := e.jobProber(ctx, t)
	probers := []enfProber{job, lease, member, other, control}

	// The node routes pod traffic to the network namespace: forwarding on the pod
	// bridge (and the veth), and each prober's route checked before it sends.
	if err := e.tn.Forward(e.node.PodBridge()); err != nil {
		t.Fatal(err)
	}
	for _, p := range probers {
		for _, a := range e.tn.Addrs() {
			if err := e.tn.CheckRouteFrom(ctx, a, p.ip, e.node.PodBridge()); err != nil {
				t.Fatalf("prober %s: %v", p.name, err)
			}
		}
	}
	for _, a := range e.tn.Addrs() {
		if err := e.tn.CheckRoute(ctx, a); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("control", func(t *testing.T) {
		for _, p := range probers {
			got := e.probe(ctx, t, p)
			for _, tg := range e.targets {
				if !reached(got[tg.spec], tg) {
					t.Errorf("without the enforcer, %s → %s (%s): %q, want reached (banner %q)", p.name, tg.name, tg.spec, got[tg.spec], tg.banner)
				}
			}
		}
	})
	if t.Failed() {
		t.Fatal("the control failed: refusals below would mean nothing")
	}

	if err := e.node.StartNetworkPolicy(ctx); err != nil {
		t.Fatal(err)
	}
	for _, p := range probers {
		if p.name == "control" {
			continue // no policy selects it: kube-router gives it no chain
		}
		if err := e.node.WaitFirewalled(ctx, p.ns, p.pod); err != nil {
			t.Fatal(err)
		}
	}
	for _, pod := range []struct{ ns, name string }{{e.nsA, "a-target"}, {e.nsB, "b-target"}} {
		if err := e.node.WaitFirewalled(ctx, pod.ns, pod.name); err != nil {
			t.Fatal(err)
		}
	}
	byName := map[string]enfProber{}
	for _, p := range probers {
		byName[p.name] = p
	}
	for _, tc := range cases {
		t.Run(tc.prober, func(t *testing.T) {
			p, ok := byName[tc.prober]
			if !ok {
				t.Fatalf("no prober %s", tc.prober)
			}
			allowedNames := slices.Clone(tc.allowed)
			if tc.publicHTTPS != "" {
				ns := map[string]string{"a": e.nsA, "b": e.nsB}[tc.publicHTTPS]
				if e.allowsAnyPublicHTTPS(ctx, t, ns) {
					t.Logf("%s's egress-allow has the rule for any public IPv4 address on TCP 443: public-443 is allowed", ns)
					allowedNames = append(allowedNames, "public-443")
				}
			}
			got := e.probe(ctx, t, p)
			want, have := map[string]string{}, map[string]string{}
			for _, tg := range e.targets {
				allowed := slices.Contains(allowedNames, tg.name)
				want[tg.name] = verdict(allowed)
				have[tg.name] = verdict(reached(got[tg.spec], tg))
				if !allowed && !strings.HasPrefix(got[tg.spec], "refused") && !strings.HasPrefix(got[tg.spec], "ok") {
					t.Logf("%s → %s: %q (a denial under kube-router is usually a REJECT: refused)", p.name, tg.name, got[tg.spec])
				}
			}
			if diff := cmp.Diff(want, have); diff != "" {
				t.Errorf("%s with the enforcer (-want +got):\n%s\nprobe outcomes:\n%s", p.name, diff, outcomes(e.targets, got))
			}
		})
	}
}

func verdict(reached bool) string {
	if reached {
		return "reached"
	}
	return "refused"
}

// reached says whether a probe's outcome reached the target: connected, and, for a
// target with a banner, answered by it.
func reached(outcome string, tg enfTarget) bool {
	if tg.banner == "" {
		return outcome == "ok" || strings.HasPrefix(outcome, "ok ")
	}
	return outcome == "ok "+tg.banner
}

// probe runs every target's dial from p (the route of the namespace's addresses
// was checked for p's IP) and returns spec → outcome.
func (e *enfEnv) probe(ctx context.Context, t *testing.T, p enfProber) map[string]string {
	t.Helper()
	specs := make([]string, len(e.targets))
	for i, tg := range e.targets {
		host, _, _ := net.SplitHostPort(strings.SplitN(tg.spec, ":", 2)[1])
		if slices.Contains(e.tn.Addrs(), host) {
			if err := e.tn.CheckRouteFrom(ctx, host, p.ip, e.node.PodBridge()); err != nil {
				t.Fatalf("prober %s: %v", p.name, err)
			}
		}
		specs[i] = tg.spec
	}
	out, err := p.probe(ctx, specs)
	if err != nil {
		t.Fatalf("probe from %s: %v", p.name, err)
	}
	return parseDials(t, out, specs)
}

// outcomes lists target → outcome for a failure message.
func outcomes(targets []enfTarget, got map[string]string) string {
	var lines []string
	for _, tg := range targets {
		lines = append(lines, fmt.Sprintf("  %-18s %-28s %s", tg.name, tg.spec, got[tg.spec]))
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// allowsAnyPublicHTTPS reports whether ns's egress-allow policy, as applied, has an
// ipBlock of 0.0.0.0/0 (standard mode's rule for public addresses on TCP 443).
func (e *enfEnv) allowsAnyPublicHTTPS(ctx context.Context, t *testing.T, ns string) bool {
	t.Helper()
	np, err := e.c.Client().NetworkingV1().NetworkPolicies(ns).Get(ctx, render.EgressAllowName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range np.Spec.Egress {
		for _, to := range r.To {
			if to.IPBlock != nil && to.IPBlock.CIDR == "0.0.0.0/0" {
				return true
			}
		}
	}
	return false
}
