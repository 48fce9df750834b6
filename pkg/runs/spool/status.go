package spool

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/pcsync/pcsync/internal/lib/safefile"
	"github.com/pcsync/pcsync/pkg/config"
	"github.com/pcsync/pcsync/pkg/runs"
)

// StatusKind is the kind of the daemon's status file.
const StatusKind = "DaemonStatus"

// DefaultHeartbeatInterval is how often the daemon rewrites its status
// file when nothing else changed. A daemon whose heartbeat is older than
// StaleHeartbeats intervals is taken for gone.
const DefaultHeartbeatInterval = 10 * time.Second

// StaleHeartbeats is how many heartbeat intervals may pass before a
// status file is stale.
const StaleHeartbeats = 3

// Status is <state>/status.json: the daemon's liveness (a heartbeat,
// refreshed every HeartbeatIntervalSec), what it serves (the companies of
// its config, with their agents) and the requests it has not finished,
// for `pcsync runs list`, `pcsync doctor` and adapters (the Paperclip
// adapter's testEnvironment). It is replaced atomically (temp file and
// rename) whenever something changed, at most a few times a second, and
// at least every heartbeat interval; it is not fsynced: it is
// informational. It never holds a secret.
type Status struct {
	// APIVersion and Kind identify the file: pcsync.io/v1alpha1,
	// Status. Files of older daemons have neither.
	APIVersion string `json:"apiVersion,omitempty"`
	Kind       string `json:"kind,omitempty"`
	// Version is the daemon's pcsync version.
	Version string `json:"version,omitempty"`
	// PID is the daemon's process id.
	PID int `json:"pid"`
	// Executor is the executor's name.
	Executor string `json:"executor"`
	// StartedAt is when the daemon started serving the spool.
	StartedAt *time.Time `json:"startedAt,omitempty"`
	// HeartbeatAt is when the daemon last wrote the file; with
	// HeartbeatIntervalSec it tells a live daemon from a gone one.
	HeartbeatAt *time.Time `json:"heartbeatAt,omitempty"`
	// HeartbeatIntervalSec is how often HeartbeatAt is refreshed at the
	// latest.
	HeartbeatIntervalSec int `json:"heartbeatIntervalSec,omitempty"`
	// StoppedAt is set when the daemon stopped serving the spool (its
	// runs go on; the next daemon adopts them).
	StoppedAt *time.Time `json:"stoppedAt,omitempty"`
	// UpdatedAt is when the file was written.
	UpdatedAt time.Time `json:"updatedAt"`
	// Companies are the companies of the daemon's current config, by slug.
	Companies []StatusCompany `json:"companies,omitempty"`
	// Runs are the accepted, unfinished runs by request name.
	Runs map[string]ActiveRun `json:"runs"`
}

// StatusCompany is a company the daemon serves.
type StatusCompany struct {
	// Slug is the company's metadata.name (a request's company).
	Slug string `json:"slug"`
	// ID is its Paperclip company id, spec.id (a request's companyId).
	ID string `json:"id"`
	// Agents are its agents, by name.
	Agents []StatusAgent `json:"agents"`
}

// StatusAgent is an agent of a served company.
type StatusAgent struct {
	// Name is the agent's name (a request's agent).
	Name string `json:"name"`
	// Adapter is its adapter type, e.g. claude_local.
	Adapter string `json:"adapter"`
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

// Alive reports whether the status file shows a live daemon at now: a
// heartbeat younger than StaleHeartbeats intervals, and no stop. A file
// without a heartbeat (an older daemon's) shows none.
func (s Status) Alive(now time.Time) bool {
	if s.HeartbeatAt == nil || s.StoppedAt != nil {
		return false
	}
	return now.Sub(*s.HeartbeatAt) < StaleHeartbeats*s.heartbeatInterval()
}

func (s Status) heartbeatInterval() time.Duration {
	if s.HeartbeatIntervalSec > 0 {
		return time.Duration(s.HeartbeatIntervalSec) * time.Second
	}
	return DefaultHeartbeatInterval
}

// StatusCompanies lists the companies and agents of m, sorted by slug and
// agent name.
func StatusCompanies(m *config.Model) []StatusCompany {
	out := make([]StatusCompany, 0, len(m.Companies))
	for i := range m.Companies {
		c := &m.Companies[i]
		sc := StatusCompany{Slug: c.Slug(), ID: c.Spec.ID, Agents: make([]StatusAgent, 0, len(c.Spec.Agents))}
		for _, a := range c.Spec.Agents {
			sc.Agents = append(sc.Agents, StatusAgent{Name: a.Name, Adapter: string(a.Adapter)})
		}
		slices.SortFunc(sc.Agents, func(a, b StatusAgent) int { return strings.Compare(a.Name, b.Name) })
		out = append(out, sc)
	}
	slices.SortFunc(out, func(a, b StatusCompany) int { return strings.Compare(a.Slug, b.Slug) })
	return out
}

// writeStatus stores the loop's view, with a fresh heartbeat. stopped
// marks the daemon's last write.
func (l *loop) writeStatus(stopped bool) {
	now := time.Now().UTC()
	iv := l.srv.opts.HeartbeatInterval
	st := Status{
		APIVersion: config.APIVersion, Kind: StatusKind, Version: l.srv.opts.Version,
		PID: os.Getpid(), Executor: l.srv.exec.Name(),
		StartedAt: &l.startedAt, HeartbeatAt: &now, HeartbeatIntervalSec: int((iv + time.Second - 1) / time.Second),
		UpdatedAt: now, Companies: StatusCompanies(l.srv.model.Load()), Runs: map[string]ActiveRun{},
	}
	if stopped {
		st.StoppedAt = &now
	}
	for name, e := range l.entries {
		switch e.state {
		case stateQueued, stateStarting, stateRunning:
			st.Runs[name] = ActiveRun{State: string(e.state), RunID: e.run.RunID, Company: e.run.Company.Slug(),
				Agent: e.run.Agent.Name, StartedAt: e.startedAt}
		}
	}
	data, err := json.MarshalIndent(st, "", "  ")
	if err == nil {
		err = safefile.WriteAtomic(l.srv.layout.StatusFile(), append(data, '\n'), 0o600, false)
	}
	if err != nil {
		l.srv.log.Warn("cannot write the status file", "error", err)
	}
}

// ReadStatus loads a daemon status file; ok is false when there is none.
// It reads the files of older daemons too (no heartbeat, no companies).
func ReadStatus(path string) (st Status, ok bool, err error) {
	ok, err = safefile.ReadJSON(path, runs.MaxStateBytes, &st)
	if err != nil {
		return st, false, fmt.Errorf("status: %w", err)
	}
	if !ok {
		return st, false, nil
	}
	if st.Kind != "" && st.Kind != StatusKind {
		return st, false, fmt.Errorf("status %s: kind %q, want %s", path, st.Kind, StatusKind)
	}
	return st, true, nil
}
