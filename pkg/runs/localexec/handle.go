package localexec

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/pcsync/pcsync/internal/lib/redact"
	"github.com/pcsync/pcsync/pkg/adapters"
	"github.com/pcsync/pcsync/pkg/runs"
)

// localHandle follows one local run: it copies the output files into
// <name>.log, feeds stdout to the adapter's parser, enforces the deadline,
// carries out cancellation and notices the end of the process.
type localHandle struct {
	e       *Executor
	r       *runs.Run
	files   localFiles
	st      RunState
	secrets []string
	log     *slog.Logger

	// exited is closed when the daemon's own child is reaped; nil for an
	// adopted run, whose process is polled instead.
	exited    chan struct{}
	shimState *os.ProcessState
	// gone is set for an adopted run whose process was already gone.
	gone bool

	cancelOnce sync.Once
	cancelCh   chan struct{}
}

func newLocalHandle(e *Executor, r *runs.Run, files localFiles, st RunState, secrets []string) *localHandle {
	return &localHandle{
		e: e, r: r, files: files, st: st, secrets: secrets,
		log:      e.log.With(r.LogAttrs()...),
		cancelCh: make(chan struct{}),
	}
}

// Cancel implements Handle.
func (h *localHandle) Cancel() { h.cancelOnce.Do(func() { close(h.cancelCh) }) }

// Release implements Handle: the run's state directory goes; its working
// directory and the agent's home stay.
func (h *localHandle) Release(context.Context) error {
	if err := os.RemoveAll(h.files.dir); err != nil {
		return fmt.Errorf("release run %s: %w", h.r.Name(), err)
	}
	return nil
}

// stopReason is why pcsync stops a run.
type stopReason string

const (
	stopCancel  stopReason = "cancel"
	stopTimeout stopReason = "timeout"
)

// Wait implements Handle.
func (h *localHandle) Wait(ctx context.Context) (runs.Ending, error) {
	out, err := newFollower(h.r, h.files, h.r.Adapter.NewParser(parserOptions(h.r, h.secrets)), redact.New(h.secrets...), h.log)
	if err != nil {
		return runs.Ending{}, err
	}
	defer out.close()

	var deadline <-chan time.Time
	if h.st.TimeoutSec > 0 && !h.st.TimedOut && !h.st.Cancelled {
		d := time.Until(h.st.StartedAt.Add(time.Duration(h.st.TimeoutSec) * time.Second))
		t := time.NewTimer(max(d, 0))
		defer t.Stop()
		deadline = t.C
	}
	var kill <-chan time.Time
	stop := func(why stopReason) {
		if h.st.Cancelled || h.st.TimedOut {
			return
		}
		if why == stopCancel {
			h.st.Cancelled = true
		} else {
			h.st.TimedOut = true
		}
		if err := writeRunState(h.files.state(), h.st, false); err != nil {
			h.log.Warn("cannot record the stop in the run state", slog.Any("error", err))
		}
		h.log.Info("stopping run: SIGTERM to its process group", slog.String("reason", string(why)), slog.Int("graceSec", h.st.GraceSec))
		h.signal(syscall.SIGTERM)
		t := time.NewTimer(time.Duration(h.st.GraceSec) * time.Second)
		kill = t.C
	}
	if h.st.Cancelled || h.st.TimedOut {
		// An earlier daemon stopped the run and did not see it end: stop
		// it again, grace period and all.
		h.signal(syscall.SIGTERM)
		kill = time.After(time.Duration(h.st.GraceSec) * time.Second)
	}

	poll := time.NewTicker(h.e.opts.PollInterval)
	defer poll.Stop()
	cancel := (<-chan struct{})(h.cancelCh)
follow:
	for {
		if err := out.drain(); err != nil {
			h.log.Warn("reading the run's output failed", slog.Any("error", err))
		}
		if h.gone || (h.exited == nil && !h.alive()) {
			break
		}
		select {
		case <-ctx.Done():
			return runs.Ending{}, ctx.Err()
		case <-h.exited: // nil for an adopted run: never ready
			break follow
		case <-poll.C:
		case <-cancel:
			cancel = nil
			stop(stopCancel)
		case <-deadline:
			deadline = nil
			stop(stopTimeout)
		case <-kill:
			kill = nil
			h.log.Warn("run did not stop within its grace period: SIGKILL to its process group")
			h.signal(syscall.SIGKILL)
		}
	}
	if !h.gone {
		// Whatever the agent left behind in its process group goes too.
		// (Not for a run found dead at adoption: its process group id
		// may belong to someone else by now.)
		h.signal(syscall.SIGKILL)
	}
	if err := out.drain(); err != nil {
		h.log.Warn("reading the run's output failed", slog.Any("error", err))
	}
	return h.ending(out), nil
}

// alive reports whether an adopted run's shim still runs (same pid, same
// start time).
func (h *localHandle) alive() bool {
	start, alive, err := procIdentity(h.st.PID)
	if err != nil {
		h.log.Warn("cannot check the run's process", slog.Any("error", err))
		return true
	}
	return alive && start == h.st.ProcStart
}

// signal sends sig to the run's process group.
func (h *localHandle) signal(sig syscall.Signal) {
	if h.st.PID <= 0 {
		return
	}
	if err := syscall.Kill(-h.st.PID, sig); err != nil && err != syscall.ESRCH {
		h.log.Warn("cannot signal the run's process group", slog.String("signal", signalName(sig)), slog.Any("error", err))
	}
}

// processOutcome is how the agent ended: from the shim's exit file, else
// from the shim's own wait status (the shim was killed too). known is false
// when neither is there: the process ended unseen. problem explains an
// exit status that is not the agent's (it could not start, the file is
// unreadable).
func (h *localHandle) processOutcome(stderrTail string) (po adapters.ProcessOutcome, known bool, problem string) {
	po = adapters.ProcessOutcome{TimedOut: h.st.TimedOut, Cancelled: h.st.Cancelled, Stderr: stderrTail}
	st, ok, err := readExitStatus(h.files.exit())
	switch {
	case err != nil:
		return po, false, fmt.Sprintf("its exit status is unreadable: %v", err)
	case ok:
		po.ExitCode, po.Signal = st.ExitCode, st.Signal
		return po, true, st.StartError
	case h.shimState != nil:
		s := statusOf(h.shimState)
		po.ExitCode, po.Signal = s.ExitCode, s.Signal
		return po, true, ""
	}
	return po, false, ""
}
