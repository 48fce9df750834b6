// Package statusctl is the daemon's controller of CompanyStatus objects
// (package companystatus), in client-go's shape: an informer of the
// daemon's namespace and its cache, a rate-limited workqueue of company
// names, one sync per name, and expectations (the objects it wrote, used
// until its informer shows them). Each reconcile's outcome (Observe, the
// reconcile loop's Options.Observe) gives every company of the shard an
// intent: Ready or why not, the revision applied or tried, suspended. A
// sync merges the intent with the object (a condition keeps its
// lastTransitionTime while its status holds) and server-side applies only
// what differs, then records an Event when the Ready reason changed or a
// new revision was applied. At rest, when reconciles change nothing, it
// sends no request. An object whose company left the config is deleted,
// but while the prune guard holds its tenant, when it says PruneHeld. A
// reconcile request (the annotation) seen calls Options.Trigger; the
// first reconcile that began after it records its value in
// status.lastHandledReconcileAt.
//
// Files:
//
//	options.go     Options and the /readyz condition CompanyStatusRecorded
//	controller.go  New, Run, Wait, Observe: the informer, the queue, the plan of each company
//	intent.go      a reconcile's outcome → each company's intent
//	merge.go       an intent and the object → the status to write; the Event a change records
//	sync.go        the informer's handlers (reconcile requests), the expectations, sync: apply or delete
package statusctl
