// Package egressproxy is a tenant's egress proxy (egress mode proxy): an
// HTTP proxy that lets the company's agents reach the hosts of its
// allow-list (package allow) on the allowed ports, and nothing else. It is
// built on Stripe's smokescreen (github.com/stripe/smokescreen), which
// decides each CONNECT and plain proxy request by host name, resolves the
// name itself and refuses to connect when every address it resolves to is
// not a public one (loopback, private, link-local such as the cloud
// metadata address, CGNAT, IPv6 that embeds IPv4), so a name an attacker
// points at 169.254.169.254 is refused like the address itself.
//
// pcsync runs it as `pcsync egress-proxy`, one Deployment per tenant
// (pkg/render); the NetworkPolicies let only the tenant's agents reach it
// and let it reach only public addresses on the allowed ports.
//
// Agents name themselves in the proxy URL's user info
// (http://<agent>@<proxy>:3128, sent as Proxy-Authorization Basic; it is
// no secret and proves nothing, it only labels the log line). A refused
// request is logged (slog, level WARN, message "egress refused") with the
// company, the agent ("unknown" when none is given), the host and port and
// the reason — never a URL path or query — and counted in
// pcsync_egress_proxy_refused_total{company,reason}.
//
// Files: proxy.go (New, Serve, the refusal log and metrics), decide.go
// (the ACL and the agent's name), tunnel.go (a CONNECT tunnel's copy),
// options.go, metrics.go. Subpackages: allow (the allow-list file and its
// host patterns, shared with config and render), agentenv (the agents'
// HTTPS_PROXY/NO_PROXY and the proxy Services' addresses), inject (the
// credential route, served by `pcsync egress-proxy --credentials`, that
// sets a model key in place of a per-run token), ghsocket (the GitHub
// CLI's socket in an agent's pod, forwarding to a GitHub credential's
// route) and tokensync (the
// daemon's controller that names the live runs' tokens on the proxy's
// pods), scale (the daemon's controller that keeps a proxy at one pod
// while its company has work, and at none once it has been idle), spend
// (what the credential route's answers cost, read as they stream) and
// spendkeep (the daemon's keeper of that spend, on the proxy's
// Deployment).
package egressproxy
