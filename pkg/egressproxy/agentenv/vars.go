package agentenv

import (
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/pcsync/pcsync/pkg/config"
	"github.com/pcsync/pcsync/pkg/egressproxy/allow"
)

// Names are the variables Vars sets, upper case first.
var Names = []string{"HTTPS_PROXY", "HTTP_PROXY", "NO_PROXY", "https_proxy", "http_proxy", "no_proxy"}

// clusterLocal are the names agents reach without the proxy: in-cluster
// Service names and this host.
var clusterLocal = []string{"localhost", "127.0.0.1", "::1", ".svc", ".cluster.local"}

// Vars are the proxy variables of an agent of company c whose proxy
// Service has address ip: the proxy URL http://<agent>@<ip>:3128 and
// NO_PROXY (NoProxy and ip), each in both cases. agent is only a label; one that
// is not a plain name is left out of the URL.
func Vars(m *config.Model, c *config.Company, ip, agent string) map[string]string {
	u := url.URL{Scheme: "http", Host: net.JoinHostPort(ip, strconv.Itoa(allow.ProxyPort))}
	if agent != "" && url.PathEscape(agent) == agent {
		u.User = url.User(agent)
	}
	proxy := u.String()
	// The proxy itself is reached directly: its credential route is a
	// base URL, not a destination to proxy to.
	no := strings.Join(append(NoProxy(m, c), ip), ",")
	return map[string]string{
		"HTTPS_PROXY": proxy, "HTTP_PROXY": proxy, "NO_PROXY": no,
		"https_proxy": proxy, "http_proxy": proxy, "no_proxy": no,
	}
}

// NoProxy are what a company's agents reach directly, not through the
// proxy: the Paperclip server's host, each allowCidrs entry, and
// cluster-local names.
func NoProxy(m *config.Model, c *config.Company) []string {
	var out []string
	if u, err := url.Parse(m.ServerURL()); err == nil && u.Hostname() != "" {
		out = append(out, u.Hostname())
	}
	for _, r := range c.Spec.Egress.AllowCIDRs {
		out = append(out, r.CIDR)
	}
	for _, h := range clusterLocal {
		if !slices.Contains(out, h) {
			out = append(out, h)
		}
	}
	return out
}
