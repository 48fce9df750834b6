package runs

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"golang.org/x/sys/unix"
	"sigs.k8s.io/yaml"

	"github.com/pcsync/pcsync/pkg/result"
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
}

// Listing is every request of a spool.
type Listing struct {
	// DaemonRunning says whether a daemon holds the spool's lock.
	DaemonRunning bool `json:"daemonRunning"`
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
	layout := Layout{Dir: stateDir}
	status, _, err := readStatus(layout.StatusFile())
	if err != nil {
		return Listing{}, err
	}
	out := Listing{DaemonRunning: lockHeld(layout.Lock())}
	for name, files := range snap.requests {
		out.Runs = append(out.Runs, describe(spool, layout, status, name, files[0], snap.results[name]))
	}
	slices.SortFunc(out.Runs, func(a, b RunInfo) int {
		return cmp.Or(a.SubmittedAt.Compare(b.SubmittedAt), cmp.Compare(a.Name, b.Name))
	})
	return out, nil
}

// ShowRun describes one request, by name or file name.
func ShowRun(spool, stateDir, name string) (RunInfo, error) {
	if kind, n := Classify(name); kind != KindIgnored {
		name = n
	}
	layout := Layout{Dir: stateDir}
	var file string
	for _, p := range (Paths{Spool: spool, Name: name}).Requests() {
		if _, err := os.Stat(p); err == nil {
			file = filepath.Base(p)
			break
		}
	}
	if file == "" {
		return RunInfo{}, fmt.Errorf("no request named %q in %s", name, spool)
	}
	status, _, err := readStatus(layout.StatusFile())
	if err != nil {
		return RunInfo{}, err
	}
	_, serr := os.Stat(Paths{Spool: spool, Name: name}.Result())
	return describe(spool, layout, status, name, file, serr == nil), nil
}

// describe builds the RunInfo of one request.
func describe(spool string, layout Layout, status DaemonStatus, name, file string, hasResult bool) RunInfo {
	paths := Paths{Spool: spool, Name: name}
	info := RunInfo{Name: name, File: file, Status: ListQueued, Log: paths.Log()}
	if fi, err := os.Stat(filepath.Join(spool, file)); err == nil {
		info.SubmittedAt = fi.ModTime().UTC()
	}
	if hasResult {
		if r, err := result.Read(paths.Result()); err == nil {
			info.Result = &r
			info.Status, info.RunID, info.Company, info.Agent, info.StartedAt = string(r.Status), r.RunID, r.Company, r.Agent, r.StartedAt
			return info
		}
	}
	// Not validated: what the request says, as far as it reads.
	var req struct {
		Company string `json:"company"`
		Agent   string `json:"agent"`
		RunID   string `json:"runId"`
	}
	if data, _, tooLarge, err := readRequestFile(filepath.Join(spool, file), DefaultMaxRequestBytes); err == nil && !tooLarge {
		_ = yaml.Unmarshal(data, &req)
	}
	info.Company, info.Agent, info.RunID = req.Company, req.Agent, cmp.Or(req.RunID, name)
	if a, ok := status.Runs[name]; ok {
		info.Status, info.StartedAt = a.State, a.StartedAt
		info.RunID, info.Company, info.Agent = a.RunID, a.Company, a.Agent
	}
	if st, ok, err := readRunState(layout.RunState(name)); err == nil && ok {
		if st.Phase == PhaseRunning {
			info.Status, info.PID = ListRunning, st.PID
			t := st.StartedAt
			info.StartedAt = &t
		} else if info.Status == ListQueued {
			info.Status = ListStarting
		}
	}
	return info
}

// lockHeld reports whether a daemon holds the lock file.
func lockHeld(path string) bool {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return false
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		return errors.Is(err, unix.EWOULDBLOCK)
	}
	_ = unix.Flock(int(f.Fd()), unix.LOCK_UN)
	return false
}
