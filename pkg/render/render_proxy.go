package render

import (
	"slices"

	"github.com/pcsync/pcsync/internal/lib/agentpod"
	"github.com/pcsync/pcsync/pkg/adapters"
	"github.com/pcsync/pcsync/pkg/config"
	"github.com/pcsync/pcsync/pkg/egressproxy/allow"
	"github.com/pcsync/pcsync/pkg/images"
)

// The egress proxy's ports and files.
const (
	// EgressProxyPort is the proxy's port, on its pod and its Service.
	EgressProxyPort = allow.ProxyPort
	// EgressProxyMetricsPort serves the proxy's /metrics and /healthz.
	EgressProxyMetricsPort = 9090
	// egressProxyUID is the proxy's user: pcsync's image's
	// (images.PcsyncUser).
	egressProxyUID = 65532
)

// egressProxyLabels select the proxy's pods.
func (t tenant) egressProxyLabels() map[string]any {
	return map[string]any{agentpod.LabelRole: agentpod.RoleEgressProxy, agentpod.LabelCompany: t.c.Metadata.Name}
}

// proxyMode reports whether the company's egress goes through its proxy.
func (t tenant) proxyMode() bool { return t.m.EgressMode(t.c) == config.EgressProxy }

// egressProxyList is the proxy's allow-list: the company's effective hosts
// (egressHosts) on 443 and the ports their base URLs name.
func egressProxyList(m *config.Model, c *config.Company) allow.List {
	return allow.List{Company: c.Metadata.Name, Hosts: egressHosts(m, c), Ports: egressPorts(c)}
}

// egressPorts are 443 and the other ports the agents' base URLs name,
// sorted. A port is allowed for every allowed host: the allow-list does
// not pair ports with hosts.
func egressPorts(c *config.Company) []int {
	ports := slices.Clone(allow.DefaultPorts)
	for i := range c.Spec.Agents {
		a := &c.Spec.Agents[i]
		ps, err := adapters.EgressPortsFor(a.Adapter, a.Env)
		if err == nil {
			ports = append(ports, ps...)
		}
	}
	slices.Sort(ports)
	return slices.Compact(ports)
}

// egressProxyObjects are, in egress mode proxy, the proxy's
// ServiceAccount, Deployment, Service and NetworkPolicy; nil in another
// mode. The allow-list is an argument of the proxy's command (no
// ConfigMap: pcsync would need to read every ConfigMap of the cluster to
// apply one; a changed list changes the pod template, which rolls the pod).
func (t tenant) egressProxyObjects() []map[string]any {
	if !t.proxyMode() {
		return nil
	}
	list := egressProxyList(t.m, t.c)
	data, err := list.Marshal()
	if err != nil {
		// A List of strings and ints always marshals.
		panic(err)
	}
	sa := t.object("v1", "ServiceAccount", EgressProxyName)
	sa["automountServiceAccountToken"] = false
	ports := append(slices.Clone(list.Ports), gatewayPorts(t.c)...)
	slices.Sort(ports)
	return []map[string]any{sa, t.egressProxyDeployment(string(data)), t.egressProxyService(), t.egressProxyPolicy(slices.Compact(ports))}
}

// egressProxyDeployment runs `pcsync egress-proxy --allow-list LIST` from
// pcsync's image, hardened as agent pods are (Pod Security restricted,
// read-only root, no ServiceAccount token, no Service links), with
// requests and limits that count against the tenant's quota.
func (t tenant) egressProxyDeployment(list string) map[string]any {
	res := config.EgressProxyResources()
	container := map[string]any{
		"name":            "egress-proxy",
		"image":           t.m.BuiltinImage(images.Pcsync),
		"imagePullPolicy": "IfNotPresent",
		"command":         []any{images.ServerPath},
		"args": []any{"egress-proxy", "--allow-list", list,
			"--listen", ":" + itoa(EgressProxyPort), "--metrics", ":" + itoa(EgressProxyMetricsPort)},
		"ports": []any{
			map[string]any{"name": "proxy", "containerPort": int64(EgressProxyPort), "protocol": "TCP"},
			map[string]any{"name": "metrics", "containerPort": int64(EgressProxyMetricsPort), "protocol": "TCP"},
		},
		"resources": map[string]any{"requests": resourceList(res.Requests), "limits": resourceList(res.Limits)},
		// Ready once the proxy's own port accepts (the Service sends
		// agents to ready pods only), probed every second: a proxy woken
		// from zero for a run is ready within a second of listening, not
		// at the next of 5 s when the kubelet's first probe came before
		// it listened. Unready after 10 s without an answer; restarted
		// when /healthz stops answering.
		"readinessProbe": map[string]any{
			"tcpSocket": map[string]any{"port": "proxy"}, "periodSeconds": int64(1), "failureThreshold": int64(10),
		},
		"livenessProbe": map[string]any{
			"httpGet":       map[string]any{"path": "/healthz", "port": "metrics"},
			"periodSeconds": int64(10), "timeoutSeconds": int64(2), "failureThreshold": int64(3),
		},
		"securityContext": map[string]any{
			"allowPrivilegeEscalation": false,
			"privileged":               false,
			"readOnlyRootFilesystem":   true,
			"runAsNonRoot":             true,
			"capabilities":             map[string]any{"drop": []any{"ALL"}},
			"seccompProfile":           map[string]any{"type": "RuntimeDefault"},
		},
	}
	pod := map[string]any{
		"serviceAccountName":           EgressProxyName,
		"automountServiceAccountToken": false,
		"enableServiceLinks":           false,
		"securityContext": map[string]any{
			"runAsNonRoot":   true,
			"runAsUser":      int64(egressProxyUID),
			"runAsGroup":     int64(egressProxyUID),
			"seccompProfile": map[string]any{"type": "RuntimeDefault"},
		},
		"containers": []any{container},
	}
	if cfg := t.credentialsConfig(); cfg != "" {
		t.withCredentials(pod, container, cfg)
		if sp := t.spendConfig(); sp != "" {
			container["args"] = append(container["args"].([]any), "--spend", sp)
		}
	}
	if secrets := t.m.ImagePullSecrets(t.c); len(secrets) > 0 {
		refs := make([]any, len(secrets))
		for i, s := range secrets {
			refs[i] = map[string]any{"name": s}
		}
		pod["imagePullSecrets"] = refs
	}
	podLabels := t.labels()
	for k, v := range t.egressProxyLabels() {
		podLabels[k] = v
	}
	// No replicas: the daemon's proxy scaler owns them (package
	// egressproxy/scale), 1 while the company has work and 0 once it has
	// been idle for spec.egress.proxyIdleSec. A Deployment is created with
	// the API's default of 1.
	o := t.object("apps/v1", "Deployment", EgressProxyName)
	o["spec"] = map[string]any{
		"selector": map[string]any{"matchLabels": t.egressProxyLabels()},
		"template": map[string]any{
			"metadata": map[string]any{"labels": podLabels},
			"spec":     pod,
		},
	}
	return o
}

// egressProxyService is the proxy's ClusterIP Service: agents reach the
// proxy at its address (the daemon reads it; agents need no cluster DNS).
func (t tenant) egressProxyService() map[string]any {
	o := t.object("v1", "Service", EgressProxyName)
	o["spec"] = map[string]any{
		"type":     "ClusterIP",
		"selector": t.egressProxyLabels(),
		"ports": []any{map[string]any{
			"name": "proxy", "port": int64(EgressProxyPort), "targetPort": "proxy", "protocol": "TCP",
		}},
	}
	return o
}

// egressProxyPolicy lets only the tenant's agents reach the proxy (and
// Settings spec.egress.metricsNamespace's pods its metrics port), and the
// proxy reach DNS and public IPv4 addresses on the allowed ports only.
func (t tenant) egressProxyPolicy(ports []int) map[string]any {
	public := make([]any, len(ports))
	for i, p := range ports {
		public[i] = port("TCP", p)
	}
	except := make([]any, len(publicIPv4Except))
	for i, c := range publicIPv4Except {
		except[i] = c
	}
	o := t.object("networking.k8s.io/v1", "NetworkPolicy", EgressProxyName)
	defer t.spendPullRule(o)
	o["spec"] = map[string]any{
		"podSelector": map[string]any{"matchLabels": t.egressProxyLabels()},
		"policyTypes": []any{"Ingress", "Egress"},
		"ingress": []any{
			map[string]any{
				"from":  []any{map[string]any{"podSelector": agentSelector()}},
				"ports": []any{port("TCP", EgressProxyPort)},
			},
			map[string]any{
				"from": []any{map[string]any{"namespaceSelector": map[string]any{"matchLabels": map[string]any{
					"kubernetes.io/metadata.name": t.m.Settings.Spec.Egress.MetricsNamespace,
				}}}},
				"ports": []any{port("TCP", EgressProxyMetricsPort)},
			},
		},
		"egress": []any{
			dnsRule(),
			map[string]any{
				"to":    []any{map[string]any{"ipBlock": map[string]any{"cidr": "0.0.0.0/0", "except": except}}},
				"ports": public,
			},
		},
	}
	return o
}
