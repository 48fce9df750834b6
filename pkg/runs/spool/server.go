package spool

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pcsync/pcsync/internal/lib/safefile"
	"github.com/pcsync/pcsync/pkg/config"
	"github.com/pcsync/pcsync/pkg/metrics"
	"github.com/pcsync/pcsync/pkg/result"
	"github.com/pcsync/pcsync/pkg/runs"
)

// Options configure a Server.
type Options struct {
	// Spool is the spool directory; required.
	Spool string
	// StateDir is where the daemon keeps its state; default
	// <spool>/.pcsync.
	StateDir string
	// Once makes Run handle every request present when it starts, wait
	// for all their results, and return; requests that arrive later are
	// left for the next daemon.
	Once bool
	// Watch enables fsnotify; without it only the periodic rescan finds
	// new requests and cancels.
	Watch bool
	// RescanInterval is how often the spool directory is listed in full,
	// to catch what fsnotify missed.
	RescanInterval time.Duration
	// SettleWindow: a request that does not parse or validate and was
	// modified within this window is retried (its writer may still be
	// writing it) before it is rejected.
	SettleWindow time.Duration
	// MaxRequestBytes caps how much of a request file is read; larger
	// files are rejected.
	MaxRequestBytes int64
	// Workers is the number of requests read, validated and adopted at
	// once.
	Workers int
	// Logger receives structured logs; every line about a run carries
	// its runId.
	Logger *slog.Logger
	// Metrics, when set, counts queued, running and finished runs.
	Metrics *metrics.Metrics
	// Shard is the shard whose companies' runs the server starts
	// (config.LabelShard; "": the companies that name none). A new run of
	// another shard's company is rejected, naming both shards; a run
	// already started (adopted) is followed to its end wherever its
	// company went.
	Shard config.Shard
	// Observe, when set, is called from the daemon loop for every step of
	// every request, in order. It must not block. Tests and tools use it.
	Observe func(Event)
	// Version is pcsync's version, written into the status file.
	Version string
	// HeartbeatInterval is how often the status file is rewritten when
	// nothing changed (its heartbeat); default DefaultHeartbeatInterval.
	HeartbeatInterval time.Duration
}

// DefaultOptions returns the options the CLI starts from.
func DefaultOptions(spool string) Options {
	return Options{
		Spool:             spool,
		StateDir:          runs.DefaultStateDir(spool),
		Watch:             true,
		RescanInterval:    2 * time.Second,
		SettleWindow:      time.Second,
		MaxRequestBytes:   runs.DefaultMaxRequestBytes,
		Workers:           runtime.GOMAXPROCS(0),
		Logger:            slog.Default(),
		HeartbeatInterval: DefaultHeartbeatInterval,
	}
}

// complete fills the zero fields with DefaultOptions' (negative durations
// and counts too) and makes Spool and StateDir absolute.
func (o *Options) complete() error {
	d := DefaultOptions(o.Spool)
	o.StateDir = cmp.Or(o.StateDir, d.StateDir)
	for _, p := range []*string{&o.Spool, &o.StateDir} {
		abs, err := filepath.Abs(*p)
		if err != nil {
			return fmt.Errorf("spool server: %w", err)
		}
		*p = abs
	}
	o.RescanInterval = cmp.Or(max(o.RescanInterval, 0), d.RescanInterval)
	o.SettleWindow = cmp.Or(max(o.SettleWindow, 0), d.SettleWindow)
	o.MaxRequestBytes = cmp.Or(max(o.MaxRequestBytes, 0), d.MaxRequestBytes)
	o.Workers = cmp.Or(max(o.Workers, 0), d.Workers)
	o.Logger = cmp.Or(o.Logger, d.Logger)
	o.HeartbeatInterval = cmp.Or(max(o.HeartbeatInterval, 0), d.HeartbeatInterval)
	return nil
}

// EventKind names a step in the life of a request.
type EventKind string

// The steps the daemon reports through Options.Observe.
const (
	// EventRetrying: the request did not validate but changed recently;
	// it is looked at again later.
	EventRetrying EventKind = "retrying"
	// EventRejected: a rejected result was written.
	EventRejected EventKind = "rejected"
	// EventQueued: the request was accepted and waits for a slot.
	EventQueued EventKind = "queued"
	// EventAdopted: the run was started by an earlier daemon and is
	// running; it holds a slot.
	EventAdopted EventKind = "adopted"
	// EventStarting: the run took a slot and is being started.
	EventStarting EventKind = "starting"
	// EventStarted: the executor started the run.
	EventStarted EventKind = "started"
	// EventCancelling: a cancel file was seen for a queued or running run.
	EventCancelling EventKind = "cancelling"
	// EventFinished: the result was written and the slot (if any) freed.
	EventFinished EventKind = "finished"
)

// Event is one step of one request.
type Event struct {
	Kind  EventKind
	Name  string
	RunID string
	// Agent is set once the request was accepted.
	Agent runs.AgentKey
	// Status is the result's status for EventFinished and EventRejected.
	Status result.Status
}

// Server serves one spool directory: it watches for requests, admits them,
// queues them per agent and runs them through a runs.Executor. One process
// serves a spool at a time (see Run).
type Server struct {
	opts   Options
	model  atomic.Pointer[config.Model]
	exec   runs.Executor
	log    *slog.Logger
	layout runs.Layout
	usage  *usageStore
	// modelSet is signalled by SetModel, for the status file.
	modelSet chan struct{}
}

// New returns a spool server for a loaded config and an executor.
func New(model *config.Model, exec runs.Executor, opts Options) (*Server, error) {
	if opts.Spool == "" {
		return nil, errors.New("spool server: no spool directory")
	}
	if model == nil || exec == nil {
		return nil, errors.New("spool server: a config model and an executor are required")
	}
	if err := opts.complete(); err != nil {
		return nil, err
	}
	if err := Prepare(opts); err != nil {
		return nil, err
	}
	layout := runs.Layout{Dir: opts.StateDir}
	s := &Server{
		opts:     opts,
		exec:     exec,
		log:      opts.Logger.With(slog.String("spool", opts.Spool), slog.String("executor", exec.Name())),
		layout:   layout,
		usage:    &usageStore{layout: layout},
		modelSet: make(chan struct{}, 1),
	}
	s.model.Store(model)
	return s, nil
}

// SetModel swaps in a newly loaded config; it is safe to call while Run
// runs. Requests read from then on are validated against m (new companies
// and agents are accepted, removed ones rejected); runs already accepted
// keep the config they were accepted against (their agent's concurrency,
// image, env). A nil m is ignored.
func (s *Server) SetModel(m *config.Model) {
	if m != nil {
		s.model.Store(m)
		select {
		case s.modelSet <- struct{}{}:
		default:
		}
	}
}

// Model returns the config requests are currently validated against.
func (s *Server) Model() *config.Model { return s.model.Load() }

// Run serves the spool until ctx ends (or, with Once, until every request
// present at start has its result). Runs still going when Run returns are
// left alone: the next daemon adopts them. Failed runs are results, not
// errors; Run fails only when it cannot serve the spool at all.
func (s *Server) Run(ctx context.Context) error {
	unlock, err := lockState(s.layout.Lock())
	if err != nil {
		return err
	}
	defer unlock()
	removeStaleTemps(s.log, s.opts.Spool, s.layout.Dir)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	l := newLoop(s)
	var wg sync.WaitGroup
	if s.opts.Watch {
		if w, err := newSpoolWatcher(s.opts.Spool, s.log); err != nil {
			// Out of inotify watches, or a file system without events:
			// the rescan still finds everything, only later.
			s.log.Warn("cannot watch the spool; relying on the periodic rescan",
				slog.Any("error", err), slog.Duration("rescanInterval", s.opts.RescanInterval))
		} else {
			wg.Add(1)
			go func() { defer wg.Done(); w.run(ctx, l.events, l.rescanNow) }()
		}
	}
	for range s.opts.Workers {
		wg.Add(1)
		go func() { defer wg.Done(); l.admitWorker(ctx) }()
	}
	s.log.Info("spool server started", slog.Bool("once", s.opts.Once), slog.String("stateDir", s.opts.StateDir))
	err = l.run(ctx, &wg)
	cancel()
	wg.Wait()
	s.log.Info("spool server stopped")
	return err
}

// lockState takes the daemon lock: one daemon per spool, or runs could
// start twice.
func lockState(path string) (unlock func(), err error) {
	l, err := safefile.TryLock(path, 0o600)
	if errors.Is(err, safefile.ErrLocked) {
		return nil, fmt.Errorf("spool lock %s: another daemon serves this spool (the lock is held)", path)
	}
	if err != nil {
		return nil, fmt.Errorf("spool lock: %w", err)
	}
	return l.Unlock, nil
}
