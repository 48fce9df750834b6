// Package manager starts and stops the daemon's controllers in client-go's
// way, as controller-runtime's manager does but smaller: each controller
// is registered once, by name; Start starts them in the order registered,
// each once the one before it says it has started (its informers listed);
// Stop stops them in the reverse order, each joined (every goroutine it
// started ended) before the one before it is stopped. A controller that
// fails, at its start or later, ends the manager's context, and Start or
// Stop returns its error prefixed with its name.
//
// The daemon (internal/daemon) runs two: the controllers every replica
// runs from its start (the shared pod informer, the egress proxies'
// watch, the credential tokens' controller, the proxies' scaler) and,
// while the replica leads, its loops (reconcile, sandbox, runs).
package manager
