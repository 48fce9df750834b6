// Package agentenv gives the pods of a company in egress mode proxy the
// variables that send their traffic through the tenant's egress proxy:
// HTTPS_PROXY, HTTP_PROXY and NO_PROXY, and their lower-case forms (curl
// reads http_proxy only in lower case, and many tools read only one form).
//
// The proxy's address is its Service's ClusterIP (Addresses, an informer
// on the proxy Services of every namespace: no API request per run), so
// an agent needs no cluster DNS to find it. The URL's user info is the
// agent's name (http://<agent>@<ip>:3128), which the proxy logs; it is no
// secret and nothing else goes in these variables.
//
// CredentialsFor gives, for a company that declares spec.credentials, the
// variables that replace a CLI's model keys: a per-run (per-lease) token in
// the key variable and the proxy's credential route as the base URL; the
// Jobs and the leases both take them from here. A GitHub credential gives
// every agent git's config that sends https://github.com/ (or its
// Enterprise host) to the route with the token in a header, and gh's
// variables for the socket package ghsocket serves in the pod.
//
// Files: vars.go (the proxy variables), addresses.go (the proxy Services'
// ClusterIPs), dns.go (no cluster DNS), hosts.go (the names a pod reaches
// without the proxy), credentials.go (a CLI's credentials), github.go (a
// GitHub credential's git config and API variables).
package agentenv
