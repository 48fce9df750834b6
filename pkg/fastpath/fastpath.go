// Package fastpath is the one switch between pcsync's fast paths and the
// reference implementations they stand in for.
//
// A fast path replaces a plain use of a well-known implementation because a
// benchmark showed the plain use too slow, and it must give the same result:
// an equivalence test beside it runs both over the same corpus and fails with
// a go-cmp diff when they differ. Read the reference first; the fast path is
// an optimisation of it. There are four, each in a file named fastpath_*.go
// whose header says what it stands in for, the measured win and where its
// equivalence test is:
//
//	pkg/render/fastpath_batch.go   kustomize (krusty) run per company with all its objects:
//	                               companies without patches skip kustomize, the others share
//	                               batched runs of only the objects a patch can select
//	pkg/render/fastpath_yaml.go    go-yaml v2's encoder (yaml.Marshal) of every object
//	pkg/config/fastpath_export.go  CUE's Value.MarshalJSON of every valid document
//	pkg/apply/fastpath_compare.go  a server-side (dry-run) apply of every object that
//	                               already exists
//
// Reference, a field of render.Options, config.LoadOptions and
// apply.ManagerOptions, turns them to their reference. pcsync's debug flag
// --reference-paths (or PCSYNC_REFERENCE_PATHS=1 in the environment, for a
// daemon that runs without it) sets it for every command, so that a bug
// report can be checked against the reference: render, validate and diff print
// the same bytes either way, only slower, and apply reports the same actions,
// but sends a request for every object instead of none for those already as
// desired.
package fastpath

// Reference, when true, makes every fast path take its reference
// implementation instead. The zero value takes the fast paths.
type Reference bool
