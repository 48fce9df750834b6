// Package inject is the credential route of a tenant's egress proxy: the
// agents' CLIs are pointed at it (ANTHROPIC_BASE_URL, OPENAI_BASE_URL, …)
// with a per-run token in place of the model key; it checks the token,
// sets the provider's header from the key, which only the proxy holds, and
// forwards the request over TLS to the provider's host or to the company's
// LLM gateway. Streamed responses pass through unbuffered.
//
// A request is served at /credentials/<name>/<the API's path>. Its token
// is taken from the header the provider takes a key in
// (adapters.Route.Headers). The daemon gives each run (a Job's pod, a
// lease's pod) a random token (NewToken), and writes only its hash, and
// the run pod's address once known, on the proxy's pod (an annotation
// under AnnotationTokenPrefix) while the run lives. The proxy reads its
// own annotations from a downwardAPI file (AnnotationTokens): it needs no
// access to the API server, and nothing but the daemon, which may patch
// the proxy's pod, can make a token valid. A refused token is answered 403
// and counted (bad_token, run_ended), never logged. A provider that refuses the key (401 or 403) is answered with an
// error, in the provider's own format, that names the credential
// <company>/<name>, so that the CLI's transcript says which key failed.
//
// A GitHub credential (github.go) serves git's smart HTTP under
// /credentials/<name>/git/ and GitHub's APIs under …/api/ and …/graphql:
// the run's token comes in Authorization (Basic, its password, as git
// sends it; Bearer or "token"), the real token goes in Basic toward git's
// host and in Bearer toward the APIs, and only to the credential's hosts.
//
// Files: token.go (tokens and their hashes), annotations.go (the live
// tokens), config.go (the route's configuration file), key.go (the key, re-read when its file changes), handler.go (the route),
// github.go (a GitHub credential's upstreams and tokens), errors.go (the
// provider-shaped refusals), metrics.go, spend.go (where a spend gate,
// package spend's, admits a request and meters its answer).
package inject
