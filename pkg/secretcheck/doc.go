// Package secretcheck tells whether Secrets exist without reading them:
// pcsync holds no get, list or watch on Secrets outside its own namespace,
// so it asks with a server-side dry-run create of an empty Secret of that
// name (AlreadyExists: it exists; created in the dry run: it does not).
// The dry run needs the create pcsync holds in tenant namespaces (the
// per-run Secrets) and nothing more; nothing is stored.
//
// Exists is that one request; doctor uses it for every Secret a config
// names. Guard checks, before a run's pod or a lease's pod is made, that
// the Secrets of the company's credentials (spec.credentials) that the
// agent's CLI uses exist, remembering each that does for a short while
// (Options.TTL) so that a burst of runs costs one request per Secret. A
// missing one is a *MissingError naming the Secret, the credential
// <company>/<name> and how to create it.
//
// Cost (BenchmarkCredentialCheck, the test control plane on loopback, 2
// cores): the dry run about 3 ms, a Secret trusted from the cache about
// 1 µs.
//
// Files: exists.go (the dry run), guard.go (the credentials' check and its
// cache), missing.go (the error).
package secretcheck
