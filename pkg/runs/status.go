package runs

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// DaemonStatus is <state>/status.json: the daemon's view of the requests
// it has not finished, for `pcsync runs list` (the results say the rest).
// It is rewritten when something changed, at most a few times a second,
// and is not fsynced: it is informational.
type DaemonStatus struct {
	// PID is the daemon's process id.
	PID int `json:"pid"`
	// Executor is the executor's name.
	Executor string `json:"executor"`
	// UpdatedAt is when the file was written.
	UpdatedAt time.Time `json:"updatedAt"`
	// Runs are the accepted, unfinished runs by request name.
	Runs map[string]ActiveRun `json:"runs"`
}

// ActiveRun is an accepted run that has no result yet.
type ActiveRun struct {
	// State is queued, starting or running.
	State     string     `json:"state"`
	RunID     string     `json:"runId"`
	Company   string     `json:"company"`
	Agent     string     `json:"agent"`
	StartedAt *time.Time `json:"startedAt,omitempty"`
}

// StatusFile is the daemon's status file.
func (l Layout) StatusFile() string { return filepath.Join(l.Dir, "status.json") }

// writeStatus stores the loop's view.
func (l *loop) writeStatus() {
	st := DaemonStatus{PID: os.Getpid(), Executor: l.d.exec.Name(), UpdatedAt: time.Now().UTC(), Runs: map[string]ActiveRun{}}
	for name, e := range l.entries {
		switch e.state {
		case stateQueued, stateStarting, stateRunning:
			st.Runs[name] = ActiveRun{State: string(e.state), RunID: e.run.RunID, Company: e.run.Company.Slug(),
				Agent: e.run.Agent.Name, StartedAt: e.startedAt}
		}
	}
	data, err := json.MarshalIndent(st, "", "  ")
	if err == nil {
		err = writeFileNoSync(l.d.layout.StatusFile(), append(data, '\n'))
	}
	if err != nil {
		l.d.log.Warn("cannot write the status file", "error", err)
	}
}

// readStatus loads the status file; ok is false when there is none.
func readStatus(path string) (DaemonStatus, bool, error) {
	var st DaemonStatus
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return st, false, nil
	}
	if err != nil {
		return st, false, fmt.Errorf("status %s: %w", path, err)
	}
	if err := json.Unmarshal(data, &st); err != nil {
		return st, false, fmt.Errorf("status %s: %w", path, err)
	}
	return st, true, nil
}

// writeFileNoSync replaces path with data through a temp file and a
// rename, without fsync.
func writeFileNoSync(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}
