package runs

import "path/filepath"

// Layout locates pcsync's files under the daemon's state directory, the
// spool server's and the executors' alike; see the package documentation
// for the tree.
type Layout struct {
	// Dir is the state directory.
	Dir string
}

// DefaultStateDir is <spool>/.pcsync.
func DefaultStateDir(spool string) string { return filepath.Join(spool, ".pcsync") }

// Lock is the daemon lock file.
func (l Layout) Lock() string { return filepath.Join(l.Dir, "daemon.lock") }

// StatusFile is the daemon's status file.
func (l Layout) StatusFile() string { return filepath.Join(l.Dir, "status.json") }

// RunDir holds the executor state of a started run.
func (l Layout) RunDir(name string) string { return filepath.Join(l.Dir, "runs", name) }

// RunState is the run's state file.
func (l Layout) RunState(name string) string { return filepath.Join(l.RunDir(name), "state.json") }

// WorkDir is the run's working directory.
func (l Layout) WorkDir(name string) string { return filepath.Join(l.Dir, "work", name) }

// Home is the HOME of an agent's runs.
func (l Layout) Home(k AgentKey) string { return filepath.Join(l.Dir, "home", k.Company, k.Agent) }

// UsageDir holds the last cumulative usage per session of an adapter.
func (l Layout) UsageDir(adapter string) string { return filepath.Join(l.Dir, "usage", adapter) }

// MaxStateBytes is the most pcsync reads of one of its state files (run
// state, exit status, status, usage totals, markers); they are a few hundred
// bytes.
const MaxStateBytes = 1 << 20
