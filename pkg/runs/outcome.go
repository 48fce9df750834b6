package runs

import (
	"fmt"
	"strings"

	"github.com/pcsync/pcsync/pkg/adapters"
	"github.com/pcsync/pcsync/pkg/result"
)

// Outcome turns how a run's process ended (po) and what its adapter's parser
// made of the output (o) into the run's result, without times and job. A
// run pcsync stopped is cancelled or timed_out whatever the output said;
// otherwise the parser's verdict stands, and a non-zero exit or a signal
// fails a run the parser thought fine. The Kubernetes executor uses it too.
func Outcome(r *Run, po adapters.ProcessOutcome, o adapters.Outcome) result.RunResult {
	res := r.NewResult()
	res.ExitCode = po.ExitCode
	if po.Signal != "" {
		res.Signal = result.Ptr(po.Signal)
	}
	res.SessionID, res.Summary, res.Model = o.SessionID, o.Summary, o.Model
	res.Usage, res.UsageBasis, res.CostUSD, res.NumTurns = o.Usage, o.UsageBasis, o.CostUSD, o.NumTurns
	res.Status = result.StatusSucceeded
	switch {
	case po.Cancelled:
		res.Fail(result.StatusCancelled, result.ErrCancelled, fmt.Sprintf(
			"cancelled by %s%s: the process group got SIGTERM, and SIGKILL after %s%s",
			r.Name(), cancelSuffix, r.Grace, endedBy(po)))
	case po.TimedOut:
		res.TimedOut = true
		res.Fail(result.StatusTimedOut, result.ErrTimeout, fmt.Sprintf(
			"timed out after %s (%s): the process group got SIGTERM, and SIGKILL after %s%s",
			r.Timeout, r.TimeoutSource, r.Grace, endedBy(po)))
	case o.Failed:
		code := result.ErrAgentFailed
		if o.ErrorCode != nil {
			code = *o.ErrorCode
		}
		msg := "the agent failed"
		if o.ErrorMessage != nil && *o.ErrorMessage != "" {
			msg = *o.ErrorMessage
		}
		res.Fail(result.StatusFailed, code, msg)
	case po.Signal != "":
		msg := fmt.Sprintf("the agent was killed by %s", po.Signal)
		if po.Signal == "SIGKILL" {
			msg += " (when pcsync did not send it, this is often the kernel's OOM killer)"
		}
		res.Fail(result.StatusFailed, result.ErrAgentFailed, msg+LastLine(po.Stderr))
	case po.ExitCode == nil:
		res.Fail(result.StatusFailed, result.ErrAgentFailed, "the agent's exit status is unknown"+LastLine(po.Stderr))
	case *po.ExitCode != 0:
		msg := fmt.Sprintf("the agent exited with code %d", *po.ExitCode)
		if *po.ExitCode == 137 {
			msg += " (128+SIGKILL: often the OOM killer)"
		}
		res.Fail(result.StatusFailed, result.ErrAgentFailed, msg+LastLine(po.Stderr))
	}
	return res
}

// endedBy says how a stopped process ended.
func endedBy(po adapters.ProcessOutcome) string {
	switch {
	case po.Signal != "":
		return "; it ended by " + po.Signal
	case po.ExitCode != nil:
		return fmt.Sprintf("; it exited with code %d", *po.ExitCode)
	}
	return ""
}

// LastLine is ": <last non-empty line of stderr>", or "".
func LastLine(stderr string) string {
	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	last := strings.TrimSpace(lines[len(lines)-1])
	if last == "" {
		return ""
	}
	if len(last) > 500 {
		last = last[:500] + "…"
	}
	return ": " + last
}
