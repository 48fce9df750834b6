package localexec

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/pcsync/pcsync/pkg/runs"
)

// Options configure the local executor.
type Options struct {
	// StateDir is the daemon's state directory (see Layout).
	StateDir string
	// Shim is the argv prefix that starts the run shim (see ShimMain); the
	// executor appends "--exit-file PATH -- AGENT [ARG...]". The default is
	// this executable with "daemon run-shim", which is right for pcsync.
	Shim []string
	// Environ is the daemon's environment: the forwarded keys and PATH,
	// LANG, LC_ALL, LC_CTYPE and TZ are taken from it. Default os.Environ().
	Environ []string
	// PollInterval is how often a run's output files are read and an
	// adopted process is checked. The end of a run the daemon started is
	// noticed at once.
	PollInterval time.Duration
	// Logger receives the executor's logs.
	Logger *slog.Logger
}

// DefaultOptions returns the options for the pcsync binary.
func DefaultOptions(stateDir string) (Options, error) {
	exe, err := os.Executable()
	if err != nil {
		return Options{}, fmt.Errorf("local executor: find own executable for the run shim: %w", err)
	}
	return Options{
		StateDir:     stateDir,
		Shim:         []string{exe, "daemon", ShimArg},
		Environ:      os.Environ(),
		PollInterval: defaultPollInterval,
		Logger:       slog.Default(),
	}, nil
}

// defaultPollInterval is DefaultOptions' PollInterval.
const defaultPollInterval = 50 * time.Millisecond

// complete checks the required fields, makes StateDir absolute (the shim
// and the agent run in another directory, and HOME must not be relative)
// and fills the zero fields with DefaultOptions' (a negative PollInterval
// too; a nil Environ, not an empty one).
func (o *Options) complete() error {
	if o.StateDir == "" {
		return errors.New("local executor: no state directory")
	}
	abs, err := filepath.Abs(o.StateDir)
	if err != nil {
		return fmt.Errorf("local executor: state directory: %w", err)
	}
	o.StateDir = abs
	if len(o.Shim) == 0 {
		return errors.New("local executor: no run shim command")
	}
	if o.Environ == nil {
		o.Environ = os.Environ()
	}
	o.PollInterval = cmp.Or(max(o.PollInterval, 0), defaultPollInterval)
	o.Logger = cmp.Or(o.Logger, slog.Default())
	return nil
}

// Executor runs each run as a local process: the agent CLI, under a
// run shim that leads its process group, in a per-run working directory,
// with HOME set to a per-agent directory and an environment built from the
// config (see EnvSpec). Output goes to files in the state directory, which
// the executor follows into <name>.log and the adapter's parser; so a run
// outlives a daemon restart and the next daemon adopts it.
type Executor struct {
	opts   Options
	layout runs.Layout
	log    *slog.Logger
}

// New returns a local executor.
func New(opts Options) (*Executor, error) {
	if err := opts.complete(); err != nil {
		return nil, err
	}
	return &Executor{opts: opts, layout: runs.Layout{Dir: opts.StateDir}, log: opts.Logger}, nil
}

// Name implements Executor.
func (e *Executor) Name() string { return "local" }

var _ runs.Executor = (*Executor)(nil)

// Start implements Executor.
func (e *Executor) Start(ctx context.Context, r *runs.Run) (runs.Handle, error) {
	return e.start(ctx, r)
}

// Adopt implements Executor.
func (e *Executor) Adopt(ctx context.Context, r *runs.Run) (runs.Handle, error) {
	return e.adopt(ctx, r)
}
