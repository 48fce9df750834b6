package runs

import (
	"context"
	"errors"

	"github.com/pcsync/pcsync/pkg/result"
)

// Executor runs accepted runs somewhere: a local process (LocalExecutor) or
// a Kubernetes Job. The daemon owns the spool, the queue, the concurrency
// guard, cancellation requests and the result file; an executor only starts,
// adopts, watches and stops runs, and reports how each one ended.
//
// Exactly once: the daemon calls Adopt for every accepted request before it
// queues it, and Start only when Adopt said ErrNotStarted. An executor must
// therefore record a run durably (a state file, a Job with a name derived
// from the run) before the run can have any effect, so that a daemon that
// restarts finds it.
type Executor interface {
	// Name is the executor's name for logs ("local", "kubernetes").
	Name() string
	// Start launches r and returns a handle on it. When Start returns an
	// error the run did not start; the daemon writes a failed result.
	Start(ctx context.Context, r *Run) (Handle, error)
	// Adopt returns a handle on a run that a previous daemon started and
	// did not finish. It returns ErrNotStarted when r was never started. A
	// run that was started but is gone (its process or Job vanished
	// without a trace of how it ended) gets a handle whose Wait reports a
	// failed result saying so.
	Adopt(ctx context.Context, r *Run) (Handle, error)
}

// Handle is one started or adopted run.
type Handle interface {
	// Wait blocks until the run has ended and returns how, with every
	// field of the result the executor knows filled in. It returns
	// ctx.Err() when ctx ends first; the run then goes on, and a later
	// daemon adopts it. The daemon calls Wait once per handle.
	Wait(ctx context.Context) (Ending, error)
	// Cancel asks the run to stop (SIGTERM, then SIGKILL after the grace
	// period; or deleting the Job). Wait then reports status cancelled.
	// Cancel may be called more than once and after the run ended.
	Cancel()
	// Release is called once the result file is written (never before,
	// and not at all when the write failed); the executor forgets the run
	// (removes its state, its per-run Secret, …).
	Release(ctx context.Context) error
}

// ErrNotStarted is returned by Executor.Adopt for a run that was never
// started.
var ErrNotStarted = errors.New("run was never started")

// Ending is how a run ended, as its executor saw it.
type Ending struct {
	// Result is the run's result, ready to be written.
	Result result.RunResult
	// SessionTotal is the session's cumulative usage as the CLI reported
	// it, for CLIs that report session totals (Codex); the daemon keeps it
	// and hands it to the session's next run as Run.PreviousUsage.
	SessionTotal *result.Usage
}

// StartError is an Executor.Start failure with the error code its result
// gets (for example agent_failed when the CLI is not installed).
type StartError struct {
	Code result.ErrorCode
	Err  error
}

// Error implements error.
func (e *StartError) Error() string { return e.Err.Error() }

// Unwrap returns the cause.
func (e *StartError) Unwrap() error { return e.Err }
