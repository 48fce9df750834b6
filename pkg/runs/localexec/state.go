package localexec

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/pcsync/pcsync/internal/lib/safefile"
	"github.com/pcsync/pcsync/pkg/runs"
)

// RunPhase is how far the local executor got with a run.
type RunPhase string

// The phases recorded in a run's state file.
const (
	// PhaseStarting is written before the process is spawned: a daemon
	// that finds a run in this phase cannot know whether it started, and
	// never starts it again.
	PhaseStarting RunPhase = "starting"
	// PhaseRunning is written once the process is spawned, with its pid.
	PhaseRunning RunPhase = "running"
)

// RunState is <state>/runs/<name>/state.json. It holds no secrets: the
// environment and the prompt are not in it.
type RunState struct {
	Phase   RunPhase `json:"phase"`
	RunID   string   `json:"runId"`
	Company string   `json:"company"`
	Agent   string   `json:"agent"`
	Adapter string   `json:"adapter"`
	// PID is the run shim's pid, the leader of the run's process group.
	PID int `json:"pid,omitempty"`
	// ProcStart is the shim's start time in clock ticks since boot; with
	// BootID it tells the shim from a later process that reuses the pid.
	ProcStart string `json:"procStart,omitempty"`
	BootID    string `json:"bootId,omitempty"`
	// StartedAt is when the process was spawned.
	StartedAt time.Time `json:"startedAt"`
	// TimeoutSec and GraceSec are the limits the run started with; an
	// adopting daemon enforces the same deadline.
	TimeoutSec    int    `json:"timeoutSec"`
	TimeoutSource string `json:"timeoutSource,omitempty"`
	GraceSec      int    `json:"graceSec"`
	// SessionResumed records whether the request resumed a session, for
	// usage accounting.
	SessionResumed bool `json:"sessionResumed,omitempty"`
	// Cancelled is set when a cancel was sent, so that an adopting daemon
	// reports the run as cancelled.
	Cancelled bool `json:"cancelled,omitempty"`
	// TimedOut is set when the deadline passed and the run was stopped.
	TimedOut bool `json:"timedOut,omitempty"`
}

// writeRunState stores st atomically. durable makes it survive a power
// loss too: that matters only for phase starting, the promise that the run
// is never started again; after a power loss the processes are gone
// anyway, and a later phase that was lost reads as starting, which ends the
// same way (failed, not started again).
func writeRunState(path string, st RunState, durable bool) error {
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return fmt.Errorf("run state %s: encode: %w", path, err)
	}
	return safefile.WriteAtomic(path, append(data, '\n'), 0o600, durable)
}

// ReadRunState loads a run's state file; ok is false when there is none.
func ReadRunState(path string) (st RunState, ok bool, err error) {
	ok, err = safefile.ReadJSON(path, runs.MaxStateBytes, &st)
	if err != nil {
		return st, false, fmt.Errorf("run state: %w", err)
	}
	return st, ok, nil
}
