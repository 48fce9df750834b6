// Package kubeexec is pcsync's Kubernetes executor: it runs each accepted run
// request as a hardened batch/v1 Job in the company's tenant namespace, with a
// per-run Secret holding the prompt and the secret environment, tracks the Job
// and its pod through shared informers (no per-run polling), follows the
// agent container's log through the API server into <name>.log while the
// adapter's parser reads the same lines, and explains every way a run can end
// (OOM kill, image pull failure, unschedulable pod, quota refusal, deadline,
// cancel, deletion by someone else) in the run's result.
//
// The package implements runs.Executor. Its files are split by verb:
//
//	options.go      Options, BuildOptions and their defaults
//	names.go        Job names and label values
//	job_build.go    the Job, from the model, the run and the adapter's command
//	secret_build.go the per-run Secret and the container environment
//	tracker.go      the shared Job/Pod/Event informers and their dispatch
//	logs_follow.go  following the container log, reconnecting without duplicates
//	explain.go      turning Job, Pod and Event state into a verdict
//	executor.go     New, the work queue's workers, and Adopt
//	start.go        Start: its steps, each undone by one rollback on failure
//	start_window.go the start window: how many runs are created at once, cut
//	                on the API server's pushback (429, timeout, slow create)
//	transient.go    which failed requests are the API server's absence, to repeat
//	journal.go      the run journal: each run recorded (fdatasync'd, group
//	                commit) before its Job is created, with the Job's UID after
//	handle.go       one run: its steps (on shared workers), Wait, Cancel
//	cleanup.go      Release: deleting Jobs once their result is written
//	marker.go       a journal record of one run (nonce, request, Job UID), and
//	                the per-run marker files of older versions the journal takes in
//
// See docs/kubernetes-executor.md for the user-facing description.
package kubeexec
