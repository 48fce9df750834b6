// Package shared builds what the daemon's two roads to the cluster (the
// Kubernetes executor's runs, the sandbox's leases) share, as controllers
// for the daemon's manager (internal/daemon/manager), run on every
// replica, leader or not, from the daemon's start to its stop:
//
//   - "pods": the daemon's one informer of pcsync's pods
//     (internal/lib/podinformer), which the run tracker, the warm pools,
//     the token controller and the scaler read;
//   - "proxy-addresses": the watch of the egress proxies' Services
//     (agentenv.Addresses), whose ClusterIPs runs and leases get;
//   - "credential-tokens": the controller that annotates each egress
//     proxy pod with its tenant's live runs' token hashes
//     (pkg/egressproxy/tokensync): a proxy checks a token whichever
//     replica made the run, and a new leader's runs are checked at once;
//   - "proxy-scale": the proxies' scaler (pkg/egressproxy/scale), which
//     acts only on the namespaces of the config this replica loaded last
//     (SetModel), so a standby that never led leaves the proxies alone;
//   - "proxy-spend": the keeper of the month's spend the proxies count
//     (pkg/egressproxy/spendkeep), in each proxy's Deployment; its
//     writes are conditional on the Deployment's resourceVersion, so the
//     replicas' passes do not undo each other's.
//
// Each is started once the one before it has listed, and joined when the
// daemon stops.
package shared
