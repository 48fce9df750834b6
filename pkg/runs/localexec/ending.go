package localexec

import (
	"fmt"
	"time"

	"github.com/pcsync/pcsync/internal/lib/redact"
	"github.com/pcsync/pcsync/pkg/result"
	"github.com/pcsync/pcsync/pkg/runs"
)

// ending builds the result of a local run once its process is gone.
func (h *localHandle) ending(out *follower) runs.Ending {
	stderrTail := out.finish()
	po, known, problem := h.processOutcome(stderrTail)
	o := out.parser.Finish(po)
	res := runs.Outcome(h.r, po, o)
	res.SetTimes(h.st.StartedAt, time.Now())
	switch {
	case !known && !h.st.Cancelled && !h.st.TimedOut:
		// Neither the shim's exit file nor a wait status: the process
		// ended while no daemon watched it and without a trace of how.
		res.Fail(result.StatusFailed, result.ErrInternal, fmt.Sprintf(
			"the run's process (pid %d, started %s by an earlier daemon) is gone and left no exit status; it is not started again",
			h.st.PID, h.st.StartedAt.Format(time.RFC3339)))
	case problem != "" && res.Status != result.StatusCancelled && res.Status != result.StatusTimedOut:
		res.Fail(result.StatusFailed, result.ErrAgentFailed, problem)
	}
	// Every string of the result, whatever the agent echoed into it.
	res.MapStrings(redact.New(h.secrets...).String)
	return runs.Ending{Result: res, SessionTotal: o.SessionCumulativeUsage}
}
