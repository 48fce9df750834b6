// Package daemon composes pcsync's two loops into one process: the
// reconcile loop (pkg/reconcile: config directory → cluster) and the runs
// loop (pkg/runs: spool directory → agent runs), optionally behind leader
// election (internal/lib/leader) so that of several replicas exactly one
// reconciles and launches runs, with the metrics and health endpoints
// served by every replica.
//
// The runs loop validates requests against the config the reconcile loop
// last loaded successfully: a config change (new companies, new agents)
// reaches it without a restart, and an invalid config leaves it on the
// last good one.
//
// The loops, and the controllers the daemon is given (Options.Controllers:
// on every replica, or only while leading), run on the controller manager
// (internal/daemon/manager): started in order, stopped in the reverse order
// and joined; one that fails ends the daemon with its name (controllers.go).
// With Options.Status, a daemon that applies records each company's status
// (pkg/companystatus/statusctl, controller "company-status", while leading)
// from each reconcile, and answers reconcile requests with the loop's
// Trigger.
//
// Beside them: the garbage collector's target for a long-lived process
// (gc.go, SetGC), the network check at start (netcheck.go, NetworkCheck),
// which proves that the tenants' NetworkPolicies are enforced, and the
// image preflight at start (images.go, ImagePreflight), which warns of
// each image the config's pods would run that its registry lacks.
package daemon

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"sync/atomic"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/pcsync/pcsync/internal/daemon/manager"
	"github.com/pcsync/pcsync/internal/lib/leader"
	"github.com/pcsync/pcsync/pkg/companystatus/statusctl"
	"github.com/pcsync/pcsync/pkg/config"
	"github.com/pcsync/pcsync/pkg/health"
	"github.com/pcsync/pcsync/pkg/metrics"
	"github.com/pcsync/pcsync/pkg/reconcile"
	"github.com/pcsync/pcsync/pkg/runs"
	"github.com/pcsync/pcsync/pkg/runs/spool"
)

// Options configure a daemon. Start from DefaultOptions.
type Options struct {
	// Reconcile configures the reconcile loop; its Dir is the config
	// directory (required). Its Logger, Metrics and Health default to the
	// daemon's, its Shard is Shard, and its OnModel gets the shard's
	// companies only. The loop always runs: with an Applier it applies,
	// without one it only loads and validates, to feed the runs loop.
	Reconcile reconcile.Options
	// Shard is the shard the daemon serves (config.LabelShard; "": the
	// companies that name none): the reconcile loop, the runs loop and the
	// sandbox see only its companies, but for the runs loop's rejection of
	// another shard's run and its adoption of a run it started before the
	// company moved.
	Shard config.Shard
	// Applier applies the rendered config; nil applies nothing (pcsync
	// daemon --no-reconcile, or --executor local).
	Applier reconcile.Applier
	// Runs configures the runs loop; nil disables it (--no-runs). Its
	// Metrics and Logger default to the daemon's.
	Runs *spool.Options
	// NewExecutor builds the runs loop's executor once this replica leads
	// and a valid config is loaded; required with Runs. Its context ends
	// when leadership (or the daemon) ends.
	NewExecutor func(ctx context.Context) (runs.Executor, error)
	// LeaderElection, when set, runs both loops only while this replica
	// holds the Lease; LeaseClient is then required.
	LeaderElection *leader.Options
	// LeaseClient reads and writes the Lease.
	LeaseClient kubernetes.Interface
	// Once reconciles once (with an Applier), then handles the run requests
	// present at start and returns when all have their results (Runs.Once is
	// set from it).
	Once bool
	// MetricsAddress, when not empty, is where /metrics, /healthz and
	// /readyz are served (e.g. ":8080"), on every replica.
	MetricsAddress string
	// Profiling serves Go's profiles (/debug/pprof/) on MetricsAddress
	// too: what the daemon's heap holds, where its CPU goes. Off by default.
	Profiling bool
	// Metrics receives the daemon's metrics; default a fresh metrics.New().
	Metrics *metrics.Metrics
	// Health holds the conditions /readyz reports; default a fresh checker.
	Health *health.Checker
	// ShutdownTimeout bounds the graceful stop of the HTTP server. Default
	// 5s.
	ShutdownTimeout time.Duration
	// Logger receives the daemon's logs. Default slog.Default().
	Logger *slog.Logger
	// OnListen, when set, is called with the address the HTTP server
	// listens on (useful with port 0).
	OnListen func(addr net.Addr)
	// APIServer, when set, is a client of the Kubernetes API server whose
	// /readyz the daemon asks every APIServerProbeInterval, on every
	// replica, for the condition APIServerReachable (nil: no probe, no
	// condition; e.g. --executor local without leader election).
	APIServer rest.Interface
	// Sandbox, when set, runs beside the runs loop (while this replica
	// leads, once a valid config is loaded) and serves Paperclip's sandbox
	// leases (pkg/sandbox); model returns the shard's part of the last
	// good config, and changed receives when the config loop loads
	// another (one value pending at most: a receive means "read model
	// again"). It returns when ctx ends.
	Sandbox func(ctx context.Context, model func() *config.Model, changed <-chan struct{}) error
	// APIServerProbeInterval is the time between two probes, and the
	// timeout of each (at least 5s). Default DefaultAPIServerProbeInterval.
	APIServerProbeInterval time.Duration
	// Status, when set, records each company's status (CompanyStatus,
	// pkg/companystatus/statusctl) on the cluster of StatusConfig while
	// this replica leads and not Once: the controller "company-status"
	// starts before the reconcile loop, observes each of its reconciles,
	// and answers a reconcile request with the loop's Trigger. The daemon
	// sets its Trigger, Shard, Logger and Health.
	Status       *statusctl.Options
	StatusConfig *rest.Config
	// Controllers run beside the loops (internal/daemon/manager), each
	// joined when the daemon stops: those not Leading on every replica
	// from the daemon's start, before it waits to lead, in their order
	// (the gating /readyz condition Controllers says which starts); the
	// Leading ones while this replica leads, before its loops. One that
	// fails, at its start or later, ends the daemon with its name.
	Controllers []manager.Controller
}

// DefaultOptions returns options for the config directory dir with the
// default reconcile loop and no runs loop, no leader election and no HTTP
// server.
func DefaultOptions(dir string) Options {
	ro := reconcile.DefaultOptions(dir)
	ro.Logger = nil // the daemon's Logger
	return Options{Reconcile: ro, ShutdownTimeout: 5 * time.Second, Logger: slog.Default()}
}

// Health condition types the daemon maintains (besides the reconcile
// loop's ConfigLoaded, ConfigValid and Reconciled).
const (
	// CondLeader (not gating) says whether this replica leads or stands by.
	CondLeader = "Leader"
	// CondRunsServed (not gating) is true while the runs loop serves the
	// spool.
	CondRunsServed = "RunsServed"
	// CondControllers (gating) is false while the controllers that run on
	// every replica start, and when one failed (Options.Controllers).
	CondControllers = "Controllers"
)

// ErrInvalidConfig is returned (wrapped, with the config's error) by Run
// with Once when the config does not load or render.
var ErrInvalidConfig = errors.New("invalid config")

func (o *Options) complete() error {
	if o.Reconcile.Dir == "" {
		return errors.New("daemon: no config directory")
	}
	if o.Runs != nil && o.NewExecutor == nil {
		return errors.New("daemon: the runs loop needs an executor")
	}
	if o.Status != nil && o.StatusConfig == nil {
		return errors.New("daemon: the company status needs a cluster")
	}
	if o.LeaderElection != nil && o.LeaseClient == nil {
		return errors.New("daemon: leader election needs a client for the Lease")
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Metrics == nil {
		o.Metrics = metrics.New()
	}
	if o.Health == nil {
		o.Health = health.NewChecker()
	}
	o.ShutdownTimeout = cmp.Or(max(o.ShutdownTimeout, 0), 5*time.Second)
	o.APIServerProbeInterval = cmp.Or(max(o.APIServerProbeInterval, 0), DefaultAPIServerProbeInterval)
	if o.Reconcile.Logger == nil {
		o.Reconcile.Logger = o.Logger
	}
	if o.Reconcile.Metrics == nil {
		o.Reconcile.Metrics = o.Metrics
	}
	if o.Reconcile.Health == nil {
		o.Reconcile.Health = o.Health
	}
	o.Reconcile.Shard = o.Shard
	if o.Runs != nil {
		r := *o.Runs
		if r.Logger == nil {
			r.Logger = o.Logger
		}
		if r.Metrics == nil {
			r.Metrics = o.Metrics
		}
		r.Once, r.Shard = o.Once, o.Shard
		o.Runs = &r
	}
	return nil
}

// Run serves until ctx ends (SIGTERM): it makes the spool ready (runs),
// starts the HTTP server and the controllers every replica runs, waits to
// lead (with leader election), then runs the loops. On the way out it
// stops the loops, then releases the Lease, then stops the controllers
// (in the reverse order), then the HTTP server. Agent runs are not
// stopped: their Jobs (or processes) go on, and the next leader adopts
// them.
//
// It returns nil when ctx ended; leader.ErrLeadershipLost when the Lease was
// lost (the process should exit and start again as a standby); with Once,
// ErrInvalidConfig when the config is invalid; or the error, prefixed with
// its name, of the loop or controller that failed: a failure ends the
// daemon at once, not at SIGTERM.
func Run(ctx context.Context, opts Options) error {
	if err := opts.complete(); err != nil {
		return err
	}
	if opts.Runs != nil {
		if err := spool.Prepare(*opts.Runs); err != nil {
			return fmt.Errorf("runs: %w", err)
		}
	}
	d := &daemon{opts: opts, log: opts.Logger}
	if opts.MetricsAddress != "" {
		stop, err := d.serve()
		if err != nil {
			return err
		}
		defer stop()
	}
	if opts.APIServer != nil {
		pctx, cancel := context.WithCancel(ctx)
		probed := make(chan struct{})
		go func() {
			defer close(probed)
			d.probeAPIServer(pctx, opts.APIServer, opts.APIServerProbeInterval)
		}()
		defer func() { cancel(); <-probed }()
	}
	always, err := d.manager(false, opts.Health)
	if err != nil {
		return err
	}
	mctx, err := always.Start(ctx)
	if err != nil {
		return err
	}
	err = d.lead(mctx)
	if serr := always.Stop(); serr != nil {
		return serr // the controller's failure that ended the rest
	}
	return err
}

// lead runs the loops, while this replica leads with leader election.
func (d *daemon) lead(ctx context.Context) error {
	opts := d.opts
	if opts.LeaderElection == nil {
		d.leading(true)
		defer d.leading(false)
		return d.work(ctx)
	}
	lo := *opts.LeaderElection
	if lo.Logger == nil {
		lo.Logger = opts.Logger
	}
	lease := lo.Namespace + "/" + lo.Name
	opts.Health.Set(CondLeader, true, false, "Standby", "waiting to acquire the Lease "+lease)
	opts.Metrics.Leader.Set(0)
	onLeading, onNew := lo.OnLeading, lo.OnNewLeader
	lo.OnLeading = func(l bool) {
		d.leading(l)
		if onLeading != nil {
			onLeading(l)
		}
	}
	lo.OnNewLeader = func(id string) {
		opts.Health.Set(CondLeader, true, false, "Standby", "the Lease "+lease+" is held by "+id)
		if onNew != nil {
			onNew(id)
		}
	}
	return leader.Run(ctx, opts.LeaseClient, lo, d.work)
}

type daemon struct {
	opts Options
	log  *slog.Logger
	// loop is the reconcile loop while this replica leads; the API server
	// probe triggers it when the server answers again.
	loop atomic.Pointer[reconcile.Loop]
	// model is the shard's part of the last valid config (the sandbox's).
	model atomic.Pointer[config.Model]
}

func (d *daemon) leading(l bool) {
	if l {
		d.opts.Metrics.Leader.Set(1)
		d.opts.Health.Set(CondLeader, true, false, "Leading", "this replica reconciles and runs agents")
		return
	}
	d.opts.Metrics.Leader.Set(0)
	d.opts.Health.Set(CondLeader, true, false, "Stopped", "this replica stopped leading")
}

// serve starts the HTTP server; stop shuts it down gracefully.
func (d *daemon) serve() (stop func(), err error) {
	ln, err := net.Listen("tcp", d.opts.MetricsAddress)
	if err != nil {
		return nil, fmt.Errorf("metrics address: %w", err)
	}
	if d.opts.OnListen != nil {
		d.opts.OnListen(ln.Addr())
	}
	srv := &http.Server{Handler: d.handler(), ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			d.log.Error("metrics server failed", slog.Any("error", err))
		}
	}()
	d.log.Info("serving /metrics, /healthz and /readyz", slog.String("address", ln.Addr().String()))
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), d.opts.ShutdownTimeout)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			_ = srv.Close()
		}
		<-done
	}, nil
}

// handler serves /metrics, /healthz and /readyz, and with Profiling
// /debug/pprof/.
func (d *daemon) handler() http.Handler {
	h := d.opts.Health.Mux(d.opts.Metrics.Handler())
	if !d.opts.Profiling {
		return h
	}
	mux := http.NewServeMux()
	mux.Handle("/", h)
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}

// work runs the loops until ctx ends (or, with Once, until the requests
// present at start have their results), beside the Leading controllers,
// all in one manager: a loop or controller that fails stops the others,
// so the daemon exits with the reason instead of running on, ready,
// without it.
func (d *daemon) work(ctx context.Context) error {
	var server atomic.Pointer[spool.Server]
	changed := make(chan struct{}, 1)
	st, err := d.statusController()
	if err != nil {
		return err
	}
	loop, err := d.newLoop(&server, changed, st)
	if err != nil {
		return err
	}
	d.loop.Store(loop)
	defer d.loop.Store(nil)

	m, err := d.manager(true, nil)
	if err != nil {
		return err
	}
	if !d.opts.Once {
		if err := d.registerLoops(m, loop, st, &server, changed); err != nil {
			return err
		}
	}
	mctx, err := m.Start(ctx)
	if err != nil {
		return err
	}
	if d.opts.Once {
		err = d.once(mctx, loop, &server)
	} else {
		<-mctx.Done()
	}
	if serr := m.Stop(); serr != nil {
		return serr
	}
	return err
}

// once reconciles once, then serves the requests present at start until
// each has its result.
func (d *daemon) once(ctx context.Context, loop *reconcile.Loop, server *atomic.Pointer[spool.Server]) error {
	if stop, err := reconcileOnce(ctx, loop); stop {
		return err
	}
	if d.opts.Runs == nil {
		return nil
	}
	if err := d.serveRuns(ctx, loop, server); err != nil {
		return fmt.Errorf("runs: %w", err)
	}
	return nil
}

// statusController builds the company status controller of this term of
// leadership (nil without Options.Status, or with Once); its trigger is
// the loop's.
func (d *daemon) statusController() (*statusctl.Controller, error) {
	if d.opts.Status == nil || d.opts.Once {
		return nil, nil
	}
	so := *d.opts.Status
	so.Shard, so.Health = d.opts.Shard, d.opts.Health
	if so.Logger == nil {
		so.Logger = d.log
	}
	so.Trigger = func() {
		if l := d.loop.Load(); l != nil {
			l.Trigger()
		}
	}
	return statusctl.New(d.opts.StatusConfig, so)
}

// newLoop makes the config loop; the shard's part of each model it loads
// goes to Reconcile.OnModel and the sandbox (signalled on changed; a signal
// already pending covers it), and the whole model to the runs loop's server
// once server holds one (it tells another shard's company from an unknown
// one). st, when not nil, observes each reconcile.
func (d *daemon) newLoop(server *atomic.Pointer[spool.Server], changed chan<- struct{}, st *statusctl.Controller) (*reconcile.Loop, error) {
	ro := d.opts.Reconcile
	if st != nil {
		observe := ro.Observe
		ro.Observe = func(out reconcile.Outcome) {
			st.Observe(out)
			if observe != nil {
				observe(out)
			}
		}
	}
	onModel := ro.OnModel
	ro.OnModel = func(m *config.Model) {
		mine := d.opts.Shard.Model(m)
		d.model.Store(mine)
		if onModel != nil {
			onModel(mine)
		}
		if s := server.Load(); s != nil {
			s.SetModel(m)
		}
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	return reconcile.New(d.opts.Applier, ro)
}

// reconcileOnce reconciles once; stop says work ends here, with err.
func reconcileOnce(ctx context.Context, loop *reconcile.Loop) (stop bool, err error) {
	out := loop.ReconcileOnce(ctx)
	switch {
	case ctx.Err() != nil:
		return true, nil
	case out.Model == nil:
		return true, fmt.Errorf("%w: %w", ErrInvalidConfig, out.Err)
	case out.Err != nil:
		return true, fmt.Errorf("reconcile: %w", out.Err)
	}
	return false, nil
}

// runSandbox runs the sandbox once the config loop has a model, until ctx
// ends; its error is nil when ctx ended. changed tells it of each config
// loaded after.
func (d *daemon) runSandbox(ctx context.Context, loop *reconcile.Loop, changed <-chan struct{}) error {
	select {
	case <-loop.Ready():
	case <-ctx.Done():
		return nil
	}
	if err := d.opts.Sandbox(ctx, d.model.Load, changed); err != nil && ctx.Err() == nil {
		return err
	}
	return nil
}

// serveRuns serves the runs loop once the config loop has a model, until
// ctx ends (or, with Once, until the requests present at start are done),
// and returns once its executor has stopped (when it can be waited for:
// Wait, as kubeexec's).
func (d *daemon) serveRuns(ctx context.Context, loop *reconcile.Loop, server *atomic.Pointer[spool.Server]) error {
	select {
	case <-loop.Ready():
	case <-ctx.Done():
		return nil
	}
	ectx, stopExec := context.WithCancel(ctx)
	defer stopExec()
	exec, err := d.opts.NewExecutor(ectx)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	if w, ok := exec.(interface{ Wait() }); ok {
		defer w.Wait()
		defer stopExec()
	}
	s, err := spool.New(loop.Model(), exec, *d.opts.Runs)
	if err != nil {
		return err
	}
	server.Store(s)
	s.SetModel(loop.Model()) // a config loaded while the executor started
	d.opts.Health.Set(CondRunsServed, true, false, "Serving", "the runs loop serves "+d.opts.Runs.Spool)
	err = s.Run(ctx)
	d.opts.Health.Set(CondRunsServed, false, false, "Stopped", "the runs loop stopped")
	return err
}
