// Package tokensync is the daemon's side of the proxy's credential route
// (package inject): it keeps each tenant's egress proxy pods annotated with
// the live credential tokens of the tenant's runs.
//
// A run's pod (a Job's, a lease's) carries its token's hash in the
// annotation agentpod.AnnotationTokenHash; the token itself is only in the run's
// env. The controller watches the agent and proxy pods of every namespace
// (a handler on the daemon's informer of pcsync's pods, Options.Pods,
// filtered by the role label), and for each namespace that changed
// (a workqueue keyed by namespace) sets on every proxy pod one annotation
// per live run, inject.AnnotationKey(hash) = "hash ip", and one naming
// its agent (spend.AnnotationAgentPrefix, whose spend the run's answers
// are), and removes the others. A run's token is live while its pod lives and has not ended; the
// pod's IP binds it once the pod has one. The state is the pods': a
// restarted daemon rebuilds it from them.
package tokensync
