// Package ghsocket is the GitHub CLI's way to a GitHub credential's route,
// inside an agent's pod (egress mode proxy, issue 56).
//
// gh takes no base URL: it calls https://api.github.com (or
// https://<host>/api/v3 of a GitHub Enterprise Server) and nothing else.
// But it honours http_unix_socket in its config file: it then dials that
// Unix socket for every request, TLS or not, and speaks plain HTTP on it,
// with GitHub's Host and path. A Forwarder listens on such a socket and
// sends each request to the credential's route on the tenant's egress
// proxy (http://<proxy>:3128/credentials/<name>/, what git's insteadOf
// points at): the REST API to …/api/…, GraphQL to …/graphql, github.com's
// git paths to …/git/…, with the run's token in Authorization in place of
// gh's (the proxy checks it and puts the real token in). A host that is
// not its credential's is refused with an error gh prints. Bodies stream
// both ways, unbuffered.
//
// pcsync init (a Job's agent container) and the sandbox command server (a
// lease's pod) start one when the agent's env names a route (EnvRoute,
// set by package agentenv with GH_CONFIG_DIR and GH_TOKEN); it writes
// gh's config.yml naming its socket in GH_CONFIG_DIR. Nothing in it is
// secret beyond the run's own token, which the pod holds already.
//
// Files:
//
//	forward.go  Forwarder: a request's host and path mapped to the route, the token set
//	serve.go    Serve and Options: the socket, gh's config file, the env it is read from
package ghsocket
