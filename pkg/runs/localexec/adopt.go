package localexec

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/pcsync/pcsync/pkg/result"
	"github.com/pcsync/pcsync/pkg/runs"
)

// adopt finds a run an earlier daemon started. No state file: never
// started. Phase starting: the daemon stopped between recording the run and
// spawning it, so it may or may not have started; it is failed, not started
// again. Phase running: the shim is verified by pid, start time and boot id;
// alive, the run is followed to its end; gone, its end is read from the
// files it left (the exit file the shim writes) or, if there is none,
// reported as lost.
func (e *Executor) adopt(_ context.Context, r *runs.Run) (runs.Handle, error) {
	files := localFiles{dir: e.layout.RunDir(r.Name())}
	st, ok, err := ReadRunState(files.state())
	if err != nil {
		// A state file that does not decode: the run was started, and
		// nothing more can be known.
		return failedHandle(e, r, files, fmt.Sprintf("the run was started by an earlier daemon but its state is unreadable (%v); it is not started again", err)), nil
	}
	if !ok {
		return nil, runs.ErrNotStarted
	}
	log := e.log.With(r.LogAttrs()...)
	if st.Phase != PhaseRunning {
		return failedHandle(e, r, files, "an earlier daemon stopped while starting this run, so it may or may not have started; it is not started again"), nil
	}
	_, secrets := e.envSecrets(r)
	h := newLocalHandle(e, r, files, st, secrets)
	if st.BootID != "" && st.BootID != bootID() {
		log.Warn("run was started before the machine rebooted; its process is gone", slog.Int("pid", st.PID))
		h.gone = true
		return h, nil
	}
	start, alive, err := procIdentity(st.PID)
	if err != nil {
		return nil, fmt.Errorf("check process %d: %w", st.PID, err)
	}
	if !alive || start != st.ProcStart {
		log.Info("run's process ended while no daemon watched it", slog.Int("pid", st.PID))
		h.gone = true
		return h, nil
	}
	log.Info("adopting running process", slog.Int("pid", st.PID))
	return h, nil
}

// failedHandle is a handle on a run that cannot be followed: Wait reports
// it failed with errorCode internal and msg.
func failedHandle(e *Executor, r *runs.Run, files localFiles, msg string) runs.Handle {
	return &staticHandle{files: files, end: func() runs.Ending {
		res := r.NewResult()
		res.Fail(result.StatusFailed, result.ErrInternal, msg)
		now := time.Now().UTC()
		res.FinishedAt = &now
		return runs.Ending{Result: res}
	}}
}

// staticHandle is a run whose ending is already known.
type staticHandle struct {
	files localFiles
	end   func() runs.Ending
}

// Wait implements Handle: the ending is known.
func (s *staticHandle) Wait(context.Context) (runs.Ending, error) { return s.end(), nil }

// Cancel implements Handle: there is nothing to stop.
func (s *staticHandle) Cancel() {}

// Release implements Handle: the run's state directory goes.
func (s *staticHandle) Release(context.Context) error {
	return (&localHandle{files: s.files}).Release(context.Background())
}
