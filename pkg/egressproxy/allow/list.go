package allow

import (
	"encoding/json"
	"fmt"
	"slices"

	"sigs.k8s.io/yaml"
)

// The proxy's names: its ServiceAccount, Deployment, Service and
// NetworkPolicy in a tenant namespace are all ProxyName; its Service
// listens on ProxyPort.
const (
	ProxyName = "paperclip-egress-proxy"
	ProxyPort = 3128
)

// DefaultPorts are the ports the proxy connects to: 443 only. The hosts
// pcsync knows (the adapters' APIs) speak HTTPS; plain HTTP on 80 would
// carry an agent's requests in the clear past the cluster, and egress mode
// cilium allows TCP 443 only, so that a company's egress means the same in
// both modes.
var DefaultPorts = []int{443}

// List is a tenant proxy's allow-list: the argument of its
// --allow-list (JSON on one line, as Marshal writes it), or a file
// (--config; JSON or YAML).
type List struct {
	// Company is the company slug, for logs and metrics.
	Company string `json:"company"`
	// Hosts are the names and patterns the company's agents may reach.
	Hosts []string `json:"hosts"`
	// Ports are the destination ports allowed; default DefaultPorts.
	Ports []int `json:"ports,omitempty"`
}

// Parse reads a List, refusing unknown fields and bad patterns.
func Parse(b []byte) (List, error) {
	var l List
	if err := yaml.UnmarshalStrict(b, &l); err != nil {
		return List{}, fmt.Errorf("allow-list: %w", err)
	}
	if l.Company == "" {
		return List{}, fmt.Errorf("allow-list: company is empty")
	}
	if len(l.Ports) == 0 {
		l.Ports = slices.Clone(DefaultPorts)
	}
	for _, p := range l.Ports {
		if p < 1 || p > 65535 {
			return List{}, fmt.Errorf("allow-list: port %d is out of range", p)
		}
	}
	if _, err := Compile(l.Hosts); err != nil {
		return List{}, fmt.Errorf("allow-list: %w", err)
	}
	return l, nil
}

// Marshal is the file's JSON, on one line: the hosts sorted and without
// duplicates.
func (l List) Marshal() ([]byte, error) {
	l.Hosts = slices.Compact(slices.Sorted(slices.Values(l.Hosts)))
	if l.Hosts == nil {
		l.Hosts = []string{}
	}
	b, err := json.Marshal(l)
	if err != nil {
		return nil, fmt.Errorf("allow-list %s: %w", l.Company, err)
	}
	return b, nil
}
