package render

import (
	"cmp"
	"encoding/json"
	"net/url"
	"path"
	"strconv"

	"github.com/pcsync/pcsync/pkg/adapters"
	"github.com/pcsync/pcsync/pkg/config"
	"github.com/pcsync/pcsync/pkg/egressproxy/inject"
)

// The proxy pod's files of the credential route.
const (
	// credentialsDir holds each credential's key as a file named after
	// the credential (a projected volume of the Secrets).
	credentialsDir = "/etc/pcsync/credentials"
	// tokensFile is the proxy pod's annotations (a downwardAPI volume),
	// where the daemon names the live runs' tokens.
	tokensDir  = "/etc/pcsync/tokens"
	tokensFile = tokensDir + "/annotations"
)

// credentialsConfig is the JSON of `pcsync egress-proxy --credentials`;
// "" when the company declares no credential.
func (t tenant) credentialsConfig() string {
	if len(t.c.Spec.Credentials) == 0 {
		return ""
	}
	c := inject.Config{Company: t.c.Metadata.Name, TokensFile: tokensFile}
	routes := adapters.Routes()
	for _, cr := range t.c.Spec.Credentials {
		upstream := cr.GatewayURL
		switch {
		case cr.Provider == adapters.ProviderGitHub:
			upstream = "https://" + cmp.Or(cr.Host, "github.com")
		case upstream == "":
			upstream = "https://" + routes[cr.Provider].Host
		}
		cc := inject.CredentialConfig{Name: cr.Name, Provider: cr.Provider,
			Type: cr.Type, Upstream: upstream, KeyFile: path.Join(credentialsDir, cr.Name)}
		if h := cr.Header; h != nil {
			cc.Header = &adapters.Header{Name: h.Name, Scheme: h.Scheme}
		}
		c.Credentials = append(c.Credentials, cc)
	}
	b, err := json.Marshal(c)
	if err != nil {
		// Strings only: always marshals.
		panic(err)
	}
	return string(b)
}

// withCredentials gives the proxy's pod the credential route: the
// --credentials argument, the Secrets' keys (mounted in this pod only) and
// its own annotations.
func (t tenant) withCredentials(pod, container map[string]any, config string) {
	container["args"] = append(container["args"].([]any), "--credentials", config)
	var sources []any
	for _, cr := range t.c.Spec.Credentials {
		// Optional: a missing Secret must not stop the proxy, and with it
		// the tenant's whole egress; its credential answers 502 until the
		// Secret exists, and the daemon refuses the runs that need it.
		sources = append(sources, map[string]any{"secret": map[string]any{
			"name":     cr.SecretRef.Name,
			"optional": true,
			"items":    []any{map[string]any{"key": cr.SecretRef.Key, "path": cr.Name, "mode": int64(0o440)}},
		}})
	}
	// The keys are readable by the proxy's group only (the kubelet gives
	// them the pod's fsGroup).
	pod["securityContext"].(map[string]any)["fsGroup"] = int64(egressProxyUID)
	pod["volumes"] = []any{
		map[string]any{"name": "credentials", "projected": map[string]any{"sources": sources}},
		map[string]any{"name": "tokens", "downwardAPI": map[string]any{"items": []any{map[string]any{
			"path": "annotations", "fieldRef": map[string]any{"fieldPath": "metadata.annotations"}}}}},
	}
	container["volumeMounts"] = []any{
		map[string]any{"name": "credentials", "mountPath": credentialsDir, "readOnly": true},
		map[string]any{"name": "tokens", "mountPath": tokensDir, "readOnly": true},
	}
}

// gatewayPorts are the ports of the company's gateway URLs other than
// 443: the proxy's policy lets it reach them.
func gatewayPorts(c *config.Company) []int {
	var ports []int
	for _, cr := range c.Spec.Credentials {
		u, err := url.Parse(cr.GatewayURL)
		if err != nil || cr.GatewayURL == "" {
			continue
		}
		if p, err := strconv.Atoi(u.Port()); err == nil && p > 0 && p != 443 {
			ports = append(ports, p)
		}
	}
	return ports
}
