package spool

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/pcsync/pcsync/internal/lib/safefile"
	"github.com/pcsync/pcsync/pkg/result"
	"github.com/pcsync/pcsync/pkg/runs"
	"github.com/pcsync/pcsync/pkg/runs/localexec"
)

// The states `pcsync runs list` shows besides the result statuses.
const (
	// ListQueued: no result, and not started (waiting for a slot, for
	// the daemon to read it, or for a daemon at all).
	ListQueued = "queued"
	// ListStarting: holds a slot, being started.
	ListStarting = "starting"
	// ListRunning: started and not finished.
	ListRunning = "running"
	// ListIgnored: the daemon does not serve the request (its name is too
	// long, or its result file is not a regular file); Problem says why.
	ListIgnored = "ignored"
)

// RunInfo is one request as `pcsync runs list` and `pcsync runs show`
// describe it.
type RunInfo struct {
	// Name is the request's name; File its file name.
	Name string `json:"name"`
	File string `json:"file"`
	// Status is queued, starting or running, or the result's status.
	Status string `json:"status"`
	// RunID, Company and Agent are the result's, else the request's as
	// far as it can be read (it is not validated here).
	RunID   string `json:"runId"`
	Company string `json:"company"`
	Agent   string `json:"agent"`
	// SubmittedAt is the request file's modification time.
	SubmittedAt time.Time `json:"submittedAt"`
	// StartedAt is when the run started, when it did.
	StartedAt *time.Time `json:"startedAt"`
	// PID is the local run shim's process id while the run is running.
	PID int `json:"pid,omitempty"`
	// Log is the path of the live log.
	Log string `json:"log"`
	// Result is the result, once written.
	Result *result.RunResult `json:"result"`
	// Problem says why an ignored request is not served.
	Problem string `json:"problem,omitempty"`
}

// Listing is every request of a spool.
type Listing struct {
	// DaemonRunning says whether a daemon serves the spool: its status
	// file has a fresh heartbeat (see Status.Alive) and it holds the
	// spool's lock (when the lock can be looked at). A status file of an
	// older daemon, without a heartbeat, leaves the lock to decide.
	DaemonRunning bool `json:"daemonRunning"`
	// Daemon is the daemon's status file, without its runs; nil when
	// there is none.
	Daemon *Status `json:"daemon,omitempty"`
	// DaemonState says in words what DaemonRunning is based on ("running,
	// heartbeat 3s ago", "not running: heartbeat 2m0s ago", …).
	DaemonState string `json:"daemonState"`
	// Runs are sorted by submission time, then name.
	Runs []RunInfo `json:"runs"`
}

// ListRuns describes every request in the spool, finished or not, from the
// spool's files and the daemon's state directory. It reads no config.
func ListRuns(spool, stateDir string) (Listing, error) {
	snap, err := scanSpool(spool)
	if err != nil {
		return Listing{}, err
	}
	layout := runs.Layout{Dir: stateDir}
	status, ok, err := ReadStatus(layout.StatusFile())
	if err != nil {
		return Listing{}, err
	}
	out := Listing{}
	out.DaemonRunning, out.DaemonState = liveness(layout, status, ok, time.Now())
	if ok {
		d := status
		d.Runs = nil
		out.Daemon = &d
	}
	for name, files := range snap.requests {
		out.Runs = append(out.Runs, describe(spool, layout, status, name, files[0], snap.results[name]))
	}
	slices.SortFunc(out.Runs, func(a, b RunInfo) int {
		return cmp.Or(a.SubmittedAt.Compare(b.SubmittedAt), cmp.Compare(a.Name, b.Name))
	})
	return out, nil
}

// ShowRun describes one request, by name or file name (a base name: a
// path, hidden name or anything else that is not a request name is
// refused, so that it never reads outside the spool).
func ShowRun(spool, stateDir, name string) (RunInfo, error) {
	if kind, n := runs.Classify(name); kind != runs.KindIgnored {
		name = n
	}
	if kind, _ := runs.Classify(name + ".json"); kind != runs.KindRequest || name != filepath.Base(name) {
		return RunInfo{}, fmt.Errorf("%q is not a request name: give the name of a request in the spool (x for x.yaml), not a path", name)
	}
	layout := runs.Layout{Dir: stateDir}
	var file string
	for _, p := range (runs.Paths{Spool: spool, Name: name}).Requests() {
		if _, err := os.Lstat(p); err == nil {
			file = filepath.Base(p)
			break
		}
	}
	if file == "" {
		return RunInfo{}, fmt.Errorf("no request named %q in %s", name, spool)
	}
	status, _, err := ReadStatus(layout.StatusFile())
	if err != nil {
		return RunInfo{}, err
	}
	_, serr := os.Lstat(runs.Paths{Spool: spool, Name: name}.Result())
	return describe(spool, layout, status, name, file, serr == nil), nil
}

// describe builds the RunInfo of one request.
func describe(spool string, layout runs.Layout, status Status, name, file string, hasResult bool) RunInfo {
	paths := runs.Paths{Spool: spool, Name: name}
	info := RunInfo{Name: name, File: file, Status: ListQueued, Log: paths.Log()}
	if fi, err := os.Lstat(filepath.Join(spool, file)); err == nil {
		info.SubmittedAt = fi.ModTime().UTC()
	}
	if p := nameProblem(name); p != "" {
		info.Status, info.Problem = ListIgnored, p
		return info
	}
	if hasResult {
		r, err := result.Read(paths.Result())
		if err == nil {
			info.Result = &r
			info.Status, info.RunID, info.Company, info.Agent, info.StartedAt = string(r.Status), r.RunID, r.Company, r.Agent, r.StartedAt
			return info
		}
		if p := resultProblem(paths, err); p != "" {
			info.Status, info.Problem = ListIgnored, p
			return info
		}
	}
	// Not validated: what the request says, as far as it reads.
	var req struct {
		Company   string `json:"company"`
		CompanyID string `json:"companyId"`
		Agent     string `json:"agent"`
		RunID     string `json:"runId"`
	}
	if data, _, tooLarge, err := runs.ReadRequestFile(filepath.Join(spool, file), runs.DefaultMaxRequestBytes); err == nil && !tooLarge {
		_ = yaml.Unmarshal(data, &req)
	}
	info.Company, info.Agent, info.RunID = cmp.Or(req.Company, req.CompanyID), req.Agent, cmp.Or(req.RunID, name)
	if a, ok := status.Runs[name]; ok {
		info.Status, info.StartedAt = a.State, a.StartedAt
		info.RunID, info.Company, info.Agent = a.RunID, a.Company, a.Agent
	}
	if st, ok, err := localexec.ReadRunState(layout.RunState(name)); err == nil && ok {
		if st.Phase == localexec.PhaseRunning {
			info.Status, info.PID = ListRunning, st.PID
			t := st.StartedAt
			info.StartedAt = &t
		} else if info.Status == ListQueued {
			info.Status = ListStarting
		}
	}
	return info
}

// Liveness reads the status file of the state directory and tells
// whether a daemon serves the spool (see Listing.DaemonRunning), in words
// too. st is nil when there is no status file.
func Liveness(stateDir string, now time.Time) (running bool, state string, st *Status, err error) {
	layout := runs.Layout{Dir: stateDir}
	s, ok, err := ReadStatus(layout.StatusFile())
	if err != nil {
		return false, "", nil, err
	}
	running, state = liveness(layout, s, ok, now)
	if ok {
		st = &s
	}
	return running, state, st, nil
}

// liveness tells from the status file and the lock whether a daemon
// serves the spool, and says so in words.
func liveness(layout runs.Layout, st Status, ok bool, now time.Time) (bool, string) {
	held, known := lockHeld(layout.Lock())
	switch {
	case !ok:
		if held {
			return true, "running (no status file yet)"
		}
		return false, "not running (no status file)"
	case st.HeartbeatAt == nil:
		// An older daemon's file: the lock decides.
		if held {
			return true, "running (its status file has no heartbeat)"
		}
		return false, "not running"
	}
	since := age(now.Sub(*st.HeartbeatAt))
	switch {
	case st.StoppedAt != nil && held:
		return true, "running (starting)"
	case st.StoppedAt != nil:
		return false, fmt.Sprintf("not running: stopped %s ago", age(now.Sub(*st.StoppedAt)))
	case !st.Alive(now) && held:
		return false, fmt.Sprintf("not running: a process holds the spool's lock but its last heartbeat is %s old (more than %d intervals of %ds); it is stuck", since, StaleHeartbeats, st.HeartbeatIntervalSec)
	case !st.Alive(now):
		return false, fmt.Sprintf("not running: last heartbeat %s ago", since)
	case known && !held:
		return false, fmt.Sprintf("not running: its heartbeat is %s old but no process holds the spool's lock (it ended without stopping)", since)
	}
	return true, fmt.Sprintf("running, heartbeat %s ago", since)
}

// age renders a duration for humans, rounded to the second.
func age(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	return d.Round(time.Second).String()
}

// lockHeld reports whether a daemon holds the lock file; known is false
// when the lock could not be looked at (no lock file, or no permission).
func lockHeld(path string) (held, known bool) {
	held, err := safefile.Held(path)
	return held, err == nil
}
