// Package podinformer makes the daemon's one informer of pcsync's pods:
// every pod labelled app.kubernetes.io/managed-by=pcsync in every
// namespace (run Jobs' pods, sandbox lease pods and warm pool members,
// the tenants' egress proxies), slimmed once (Slim) to what any of its
// consumers reads. The run tracker (pkg/runs/kubeexec), the warm pools
// (pkg/sandbox/pool) and the credential tokens' controller
// (pkg/egressproxy/tokensync) each register a handler on it (Handle),
// filter by their own labels, and add their own indexes (AddIndexers);
// the informer lives as long as the daemon, they come and go.
//
// Files:
//
//	informer.go  Options, New, Start and Stop; Handle and AddIndexers for consumers
//	slim.go      Slim: the transform that keeps what the consumers read
package podinformer
