// Package apply puts a set of rendered Kubernetes objects into a cluster and keeps it
// there: server-side apply with the field manager "pcsync", staged (CRDs, then
// cluster-scoped objects and Namespaces, then namespaced objects) and parallel; a
// no-op detector that decides from one LIST per kind (not a GET or dry-run per object)
// whether an object is already as desired, so that a sync with nothing to do sends no
// mutating request; an inventory that is a kubectl ApplySet (KEP-3659), so prune only
// ever deletes what this set applied; server-side dry-run diffs with Secret values
// masked; and waiting for readiness with kstatus.
//
// The package takes objects, not configs: callers render first. Its entry point is
// Manager (NewManager), with the verbs Apply, Diff and Wait.
//
// The no-op detector is a fast path: it stands in for sending every object to the
// server. ManagerOptions.Reference turns it off (see package fastpath).
package apply
