// Package kubeexec is pcsync's Kubernetes executor: it runs each accepted run
// request as a hardened batch/v1 Job in the company's tenant namespace, with a
// per-run Secret holding the prompt and the secret environment, tracks the Job
// and its pod through informers (no per-run polling; the pods' is the
// daemon's one informer of pcsync's pods, Options.Pods), follows the
// agent container's log through the API server into <name>.log while the
// adapter's parser reads the same lines, and explains every way a run can end
// (OOM kill, image pull failure, unschedulable pod, quota refusal, deadline,
// cancel, deletion by someone else) in the run's result.
//
// The package implements runs.Executor. A run's life, start to end:
//
//	build → reserve → window → (credentials' Secrets exist) journal start → Job → Secret → journal created → steps → finish → Wait → Release: delete the Job → journal end
//
// Start (start.go) builds the Job and the Secret and checks the tenant
// namespace, then takes its steps: a slot of the agent's concurrency by the
// cluster's count (reserve), a place in the start window, the run's start
// record (with its nonce) on disk while the Secrets of the credentials the
// run uses are confirmed to exist (start_credentials.go: a missing one
// fails the run, auth_required, before its Job), the Job, the Secret; a
// step that fails undoes the ones before it, newest first. Then the Job's
// UID goes into the journal, the window's place is given back, and the
// handle (handle.go) follows the run: its steps read the informer caches on
// every event of the Job (state following); the step that finds the run
// final hands it to finish (finishing), which builds the result and frees
// the slot (finished).
// The spool writes the result, then Release deletes the Job (unless the
// company retains Jobs) and ends the journal record. Adopt takes a run up at
// the handle, after a restart.
//
// Four places wait and try again, each for its own reason:
//
//   - the work queue (executor.go) holds no retry: a step reads caches and
//     has no request to repeat; AddAfter only looks again when a grace
//     period the verdict names (unschedulable, quota, config error) runs
//     out.
//   - untilAnswered (transient.go) repeats Start's Job and Secret creates
//     (and the get after AlreadyExists) while the API server is away or
//     overloaded, 200 ms doubling to 5 s. It must stay inside Start: Start
//     answers the spool with a handle or an error, holds the start window's
//     place meanwhile (the window shrinks on pushback), and ends with
//     Start's context.
//   - Cancel's goroutine (handle.go) deletes the Job until it succeeds, the
//     run ends or the executor stops, 500 ms doubling to 30 s, whatever the
//     error (both loops are retry, on apimachinery's wait.Backoff). On the
//     work queue's rate limiter each attempt (up to DeleteTimeout) would
//     hold one of the four step workers, delaying every other run's steps
//     while the API server is away, and would count in
//     pcsync_workqueue_retries_total.
//   - finish deletes a Job its verdict stops once, without a loop: it runs
//     in a goroutine of its own because it waits for the follower to read
//     the end of the log, and Release deletes the Job again (unless Jobs are
//     retained) once the result is written.
//
// Beyond those, the log follower reconnects (logs_follow.go), and client-go
// repeats 429 answers and re-lists broken watches itself.
//
// Its files are split by verb:
//
//	options.go      Options, BuildOptions and their defaults
//	names.go        Job names and label values
//	job_build.go    the Job, from the model, the run and the adapter's command
//	secret_build.go the per-run Secret and the container environment
//	tracker.go      the Job and Event informers, the tracker's index and handler on the daemon's pod informer (podinformer), their dispatch
//	logs_follow.go  following the container log, reconnecting without duplicates
//	explain.go      turning Job, Pod and Event state into a verdict
//	executor.go     New, the work queue's workers, and Adopt
//	start.go        Start: its steps, each undone by one rollback on failure
//	start_credentials.go the check that a run's credential Secrets exist
//	start_proxy.go  a run whose egress proxy was scaled to zero, in an image without pcsync init: the proxy up before its Job
//	                (secretcheck.Guard), beside the journal's write
//	start_window.go the start window: how many runs are created at once, cut
//	                on the API server's pushback (429, timeout, slow create)
//	transient.go    which failed requests are the API server's absence, to repeat;
//	                retry, the loop of untilAnswered and Cancel (wait.Backoff)
//	journal.go      the run journal: each run recorded (fdatasync'd, group
//	                commit) before its Job is created, with the Job's UID after
//	handle.go       one run once its Job exists: its states, its steps (on
//	                shared workers), finish, Wait, Cancel
//	cleanup.go      Release: the Secret deleted once the result is written, the
//	                Job kept until its ttlSecondsAfterFinished (a late create of it
//	                is answered AlreadyExists)
//	times.go        a run's start and end: pcsync init's record, else this
//	                daemon's watch of the container, to the millisecond
//	marker.go       a journal record of one run (nonce, request, Job UID), and
//	                the per-run marker files of older versions the journal takes in
//
// See docs/kubernetes-executor.md for the user-facing description.
package kubeexec
