// Package spendkeep is the daemon's side of the spend the egress proxies
// count (package spend): it keeps each tenant's month of spend outside
// the proxy, so that it survives the proxy's restart, its scale to zero,
// a rollout and the daemon's own restart.
//
// Every Interval, and at once when a proxy pod is stopping (its process
// serves /spend until it has been pulled, at most 10 s) or gone, the
// Keeper pulls each proxy pod's report (/spend on its metrics port: the
// id its process drew at start and what that process counted this
// month), merges it into the tenant's spend.Record, kept as the annotation AnnotationRecord of the
// proxy's Deployment (which outlives its pods, and pcsync's apply leaves
// an annotation it does not own), folds the processes of pods that are
// gone, forgets the runs that ended, and gives each proxy pod its base
// (what the month's other processes counted) as the pod annotation
// spend.AnnotationBase, which the proxy reads from its downwardAPI file.
// A record is written with the Deployment's resourceVersion: a write
// that raced another is retried on the next pass. The state is the
// Deployments' and the proxies': a restarted daemon loses nothing.
//
// Files: keeper.go (Options, the Keeper's loop), sync.go (one tenant's
// pass: pull, merge, write).
package spendkeep
