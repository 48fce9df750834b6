// Package scale keeps each tenant's egress proxy at one pod while its
// company has work for it and at none once the company has been idle for
// its idle period (Settings or Company spec.egress.proxyIdleSec): an idle
// company holds no pod and reserves no CPU or memory.
//
// pcsync renders the proxy's Deployment without replicas; this controller
// owns them, through the Deployment's scale subresource and a field manager
// of its own (FieldManager), so that pcsync's apply never takes them back.
// A Deployment is created with the API's default of one replica, and a
// proxy the controller has not seen busy counts as busy since it first saw
// it (the daemon's start, or the Deployment's creation).
//
// A namespace is busy while it holds a live agent pod (a run's, a lease's,
// a warm pool member's: role agent, not ended), and after Need (a run or
// lease about to make its pod: the proxy starts while the pod does) until
// a live agent pod is seen, NeedFor at most. It is never scaled down when its idle period is 0. The controller
// reads pods from the daemon's shared pod informer and proxies'
// Deployments from a watch of their own (by name, slimmed to replicas and
// status); a workqueue keyed by namespace syncs them. Nothing polls: an idle
// namespace is queued again when its idle period ends.
//
// A run's pod that starts before its proxy waits for the proxy's port in
// its PID 1 (`pcsync init --wait-proxy`); a lease's acquire waits with Ready.
//
// Files:
//
//	controller.go  New, Run, the informers' handlers
//	sync.go        the decision for one namespace and the scale it applies
//	need.go        Need and Ready, for the executor and the sandbox
package scale
