package render

import (
	"slices"
	"strconv"

	"github.com/pcsync/pcsync/internal/lib/agentpod"
	"github.com/pcsync/pcsync/pkg/config"
	"github.com/pcsync/pcsync/pkg/egressproxy/allow"
)

// denyAll denies all ingress and egress of every pod in the namespace; the
// other policies open what agents need.
func (t tenant) denyAll() map[string]any {
	o := t.object("networking.k8s.io/v1", "NetworkPolicy", DenyAllName)
	o["spec"] = map[string]any{
		"podSelector": map[string]any{},
		"policyTypes": []any{"Ingress", "Egress"},
	}
	return o
}

func agentSelector() map[string]any {
	return map[string]any{"matchLabels": map[string]any{agentpod.LabelRole: agentpod.RoleAgent}}
}

func port(protocol string, p int) map[string]any {
	return map[string]any{"protocol": protocol, "port": int64(p)}
}

// dnsRule is the egress rule to kube-dns.
func dnsRule() map[string]any {
	return map[string]any{
		"to": []any{map[string]any{
			"namespaceSelector": map[string]any{"matchLabels": map[string]any{"kubernetes.io/metadata.name": "kube-system"}},
			"podSelector":       map[string]any{"matchLabels": map[string]any{"k8s-app": "kube-dns"}},
		}},
		"ports": []any{port("UDP", 53), port("TCP", 53)},
	}
}

// egressAllow lets agent pods reach the Paperclip server and the allowed
// CIDRs, and kube-dns except in proxy mode; in proxy mode also the
// tenant's egress proxy, which resolves every name the agents reach
// through it (their pods have no cluster DNS: agentenv.NoClusterDNS); in
// standard mode, when host names are wanted, also public IPv4 on TCP 443
// (a NetworkPolicy cannot name hosts).
func (t tenant) egressAllow() map[string]any {
	srv := t.m.Settings.Spec.Server
	var rules []any
	if !t.proxyMode() {
		rules = append(rules, dnsRule())
	}
	rules = append(rules,
		map[string]any{
			"to": []any{map[string]any{
				"namespaceSelector": map[string]any{"matchLabels": map[string]any{"kubernetes.io/metadata.name": srv.Namespace}},
				"podSelector":       map[string]any{"matchLabels": stringMap(srv.PodSelector)},
			}},
			"ports": []any{port("TCP", srv.Port)},
		})
	for _, r := range t.c.Spec.Egress.AllowCIDRs {
		ports := make([]any, len(r.Ports))
		for i, p := range r.Ports {
			ports[i] = port(r.Protocol, p)
		}
		rules = append(rules, map[string]any{
			"to":    []any{map[string]any{"ipBlock": map[string]any{"cidr": r.CIDR}}},
			"ports": ports,
		})
	}
	if t.proxyMode() {
		rules = append(rules, map[string]any{
			"to":    []any{map[string]any{"podSelector": map[string]any{"matchLabels": t.egressProxyLabels()}}},
			"ports": []any{port("TCP", EgressProxyPort)},
		})
	}
	if t.m.EgressMode(t.c) == config.EgressStandard && t.m.WantsFQDNs(t.c) {
		except := make([]any, len(publicIPv4Except))
		for i, c := range publicIPv4Except {
			except[i] = c
		}
		rules = append(rules, map[string]any{
			"to":    []any{map[string]any{"ipBlock": map[string]any{"cidr": "0.0.0.0/0", "except": except}}},
			"ports": []any{port("TCP", 443)},
		})
	}
	o := t.object("networking.k8s.io/v1", "NetworkPolicy", EgressAllowName)
	o["spec"] = map[string]any{
		"podSelector": agentSelector(),
		"policyTypes": []any{"Egress"},
		"egress":      rules,
	}
	return o
}

// egressFQDN is, in cilium mode, the CiliumNetworkPolicy that lets agent
// pods reach their hosts by name on TCP 443. Its DNS rule sends lookups
// through Cilium's DNS proxy, which is how toFQDNs learns the addresses.
// Nil in standard mode or when no host is wanted.
func (t tenant) egressFQDN() map[string]any {
	if t.m.EgressMode(t.c) != config.EgressCilium {
		return nil
	}
	hosts := egressHosts(t.m, t.c)
	if len(hosts) == 0 {
		return nil
	}
	fqdns := make([]any, len(hosts))
	for i, h := range hosts {
		if allow.IsPattern(h) {
			fqdns[i] = map[string]any{"matchPattern": h}
			continue
		}
		fqdns[i] = map[string]any{"matchName": h}
	}
	ciliumPort := func(protocol string, p int) map[string]any {
		return map[string]any{"port": strconv.Itoa(p), "protocol": protocol}
	}
	o := t.object("cilium.io/v2", "CiliumNetworkPolicy", EgressFQDNName)
	o["spec"] = map[string]any{
		"endpointSelector": agentSelector(),
		"egress": []any{
			map[string]any{
				"toEndpoints": []any{map[string]any{"matchLabels": map[string]any{
					"k8s:io.kubernetes.pod.namespace": "kube-system",
					"k8s-app":                         "kube-dns",
				}}},
				"toPorts": []any{map[string]any{
					"ports": []any{ciliumPort("UDP", 53), ciliumPort("TCP", 53)},
					"rules": map[string]any{"dns": []any{map[string]any{"matchPattern": "*"}}},
				}},
			},
			map[string]any{
				"toFQDNs": fqdns,
				"toPorts": []any{map[string]any{"ports": []any{ciliumPort("TCP", 443)}}},
			},
		},
	}
	return o
}

// egressHosts are the host names a company's agents may reach: their
// adapters' effective allowFqdns, the hosts their env implies, and the
// company's own allowFqdns; sorted, without duplicates.
func egressHosts(m *config.Model, c *config.Company) []string {
	hosts := slices.Clone(c.Spec.Egress.AllowFQDNs)
	for i := range c.Spec.Agents {
		a := &c.Spec.Agents[i]
		hosts = append(hosts, m.Adapter(a.Adapter).AllowFQDNs...)
		hosts = append(hosts, envEgressHosts(a.Adapter, a.Env)...)
	}
	slices.Sort(hosts)
	return slices.Compact(hosts)
}
