package egressproxy

import (
	"encoding/base64"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"

	acl "github.com/stripe/smokescreen/pkg/smokescreen/acl/v1"

	"github.com/pcsync/pcsync/pkg/egressproxy/allow"
)

// The reasons the decider gives smokescreen, mapped back to ReasonHost and
// ReasonPort when a refusal is logged.
const (
	decisionHost = "host is not in the company's allow-list"
	decisionPort = "port is not allowed"
	decisionOK   = "host is in the company's allow-list"
)

// UnknownAgent names an agent that did not name itself.
const UnknownAgent = "unknown"

// decider is the company's ACL: the same for every agent (smokescreen's
// role is the agent, for logs only).
type decider struct {
	hosts *allow.Matcher
	ports map[int]bool
}

func newDecider(l allow.List) (*decider, error) {
	m, err := allow.Compile(l.Hosts)
	if err != nil {
		return nil, err
	}
	d := &decider{hosts: m, ports: map[int]bool{}}
	for _, p := range l.Ports {
		d.ports[p] = true
	}
	return d, nil
}

// Decide allows a request when its host is in the allow-list and its port
// is allowed. smokescreen then resolves the host and refuses it when no
// address is public.
func (d *decider) Decide(a acl.DecideArgs) (acl.Decision, error) {
	if !d.hosts.Match(a.Host) {
		return acl.Decision{Result: acl.Deny, Reason: decisionHost}, nil
	}
	if a.Req == nil || !d.ports[destPort(a.Req)] {
		return acl.Decision{Result: acl.Deny, Reason: decisionPort}, nil
	}
	return acl.Decision{Result: acl.Allow, Reason: decisionOK}, nil
}

// destPort is the port a proxy request goes to: a CONNECT's authority's,
// else the URL's, else its scheme's default; 0 when there is none.
func destPort(r *http.Request) int {
	hostport := r.Host
	if r.Method != http.MethodConnect && r.URL != nil && r.URL.Host != "" {
		hostport = r.URL.Host
	}
	if _, p, err := net.SplitHostPort(hostport); err == nil {
		n, err := strconv.Atoi(p)
		if err != nil {
			return 0
		}
		return n
	}
	switch {
	case r.Method == http.MethodConnect:
		return 0
	case r.URL != nil && r.URL.Scheme == "https":
		return 443
	default:
		return 80
	}
}

// agentName is what an agent calls itself: a DNS-label-like name.
var agentName = regexp.MustCompile(`^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$`)

// agentOf is the agent a request names in its Proxy-Authorization (Basic,
// the user name; the password, if any, is ignored and never kept), else
// UnknownAgent.
func agentOf(r *http.Request) string {
	h := r.Header.Get("Proxy-Authorization")
	scheme, cred, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Basic") {
		return UnknownAgent
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(cred))
	if err != nil {
		return UnknownAgent
	}
	user, _, _ := strings.Cut(string(raw), ":")
	if !agentName.MatchString(user) {
		return UnknownAgent
	}
	return user
}
