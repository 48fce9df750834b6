package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/pcsync/pcsync/internal/daemon"
	"github.com/pcsync/pcsync/internal/daemon/shared"
	"github.com/pcsync/pcsync/internal/lib/leader"
	"github.com/pcsync/pcsync/pkg/apply"
	"github.com/pcsync/pcsync/pkg/config"
	"github.com/pcsync/pcsync/pkg/health"
	"github.com/pcsync/pcsync/pkg/imagecheck"
	"github.com/pcsync/pcsync/pkg/introspect"
	"github.com/pcsync/pcsync/pkg/metrics"
	"github.com/pcsync/pcsync/pkg/reconcile"
	"github.com/pcsync/pcsync/pkg/render"
	"github.com/pcsync/pcsync/pkg/runs"
	"github.com/pcsync/pcsync/pkg/runs/localexec"
	"github.com/pcsync/pcsync/pkg/runs/spool"
)

// daemonFlags are the flags of `pcsync daemon`.
type daemonFlags struct {
	config, spool, stateDir, executor, metricsAddr string
	profiling                                      bool
	once, noReconcile, noRuns                      bool
	rescan                                         time.Duration

	interval, debounce time.Duration
	renderCache        bool
	// gitopsFlags are apply's and diff's ApplySet, side and prune flags,
	// added with the daemon's own help.
	gitopsFlags
	forceConflicts bool

	sandbox sandboxFlags
	// shared are the controllers the executor and the sandbox share (set
	// by options when either runs).
	shared *shared.Shared
	// skipNetworkCheck leaves out the network check at start
	// (internal/daemon.NetworkCheck).
	skipNetworkCheck bool

	// shard is the shard served (--shard): its companies only, its own
	// Lease and ApplySet.
	shard string

	leaderElect                            bool
	leaseNamespace, leaseID                string
	leaseDuration, renewDeadline, retryDur time.Duration
}

// daemonLong is the help of pcsync daemon.
const daemonLong = `daemon runs two loops in one process.

DIR is the config directory, as for apply, diff and validate (--config DIR is
the same, kept for deployments that pass it).

The reconcile loop loads, validates, renders and server-side applies DIR at
start, whenever a file under it changes (fsnotify; a symbolic link swapped by
git-sync is followed), and every --interval to correct drift: fields another
field manager changed are taken back (--force-conflicts). With --prune it deletes
what pcsync applied and no longer renders; the prune guard holds an empty render,
the whole fleet or more tenants than --prune-max (at least --prune-floor) until
that prune is approved, and applies the rest. Companies with
spec.paperclip.manage also get their agents kept in Paperclip at every
reconcile (docs/paperclip.md); --paperclip=false leaves that side out,
--kubernetes=false applies nothing to the cluster and keeps only the
Paperclip side (with --executor local no cluster is needed). An invalid config changes
nothing: the last good state stays, and the failure is logged, counted
(pcsync_config_valid 0) and shown on /readyz. --no-reconcile keeps the config
for the runs loop but applies nothing (as does --executor local).

The runs loop watches --spool for run requests (<name>.json or <name>.yaml,
written as a hidden or .tmp file and renamed in), validates each against the
Run schema and the current config, queues them per agent and runs them: with
--executor kubernetes (the default) as hardened Jobs in the tenant namespaces,
with --executor local as local processes, no cluster needed. Output streams to
<name>.log; the result is written once to <name>.result.json. <name>.cancel
cancels a run. A restarted daemon adopts the runs the previous one left
running; no run ever runs twice. --no-runs disables this loop.

With --leader-elect, of several replicas only the holder of a Lease
(--leader-election-id in --leader-election-namespace) runs the loops; a
standby takes over when the leader stops (at once after a graceful stop, after
the lease duration after a crash). /metrics, /healthz and /readyz are served
on --metrics-bind-address by every replica. SIGTERM stops the loops, releases
the Lease and exits; runs go on and are adopted.

With --shard=NAME the daemon serves only the companies whose metadata.labels
name pcsync.io/shard: NAME (without it, those that name none), with a Lease
and an ApplySet of its own (pcsync-NAME unless --leader-election-id or
--applyset name another) and its own --spool. A company moved to another
shard is handed over: never pruned here, taken by the other shard's apply;
runs started here finish here, new ones are rejected.

--once reconciles once, handles every request present at start, waits for all
their results and exits 0; failed runs are results, not daemon errors.
See docs/daemon.md and docs/runs.md.`

func newDaemonCmd(g *globalOptions) *cobra.Command {
	ro := reconcile.DefaultOptions("")
	lo := leader.DefaultOptions()
	f := daemonFlags{executor: "kubernetes", rescan: spool.DefaultOptions("").RescanInterval,
		interval: ro.Interval, debounce: ro.Debounce,
		leaseID: lo.Name, leaseDuration: lo.LeaseDuration, renewDeadline: lo.RenewDeadline, retryDur: lo.RetryPeriod}
	cmd := &cobra.Command{
		Use:   "daemon DIR --spool DIR [--executor kubernetes|local] [--once]",
		Short: "Keep the cluster in the shape of the config directory and run the agent work requested in a spool directory",
		Long:  daemonLong,
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := f.configDir(args); err != nil {
				return err
			}
			return f.run(cmd.Context(), g)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.config, "config", "", "the config directory, as the DIR argument gives it (kept for deployments that pass it); may be a symbolic link that git-sync swaps")
	fl.StringVar(&f.spool, "spool", "", "spool directory of run requests (required unless --no-runs)")
	fl.StringVar(&f.executor, "executor", f.executor, "where runs execute: kubernetes or local")
	fl.BoolVar(&f.once, "once", false, "reconcile once, handle the requests present at start, wait for their results, exit")
	fl.StringVar(&f.stateDir, "state-dir", "", "daemon state directory (default <spool>/.pcsync)")
	fl.DurationVar(&f.rescan, "rescan-interval", f.rescan, "how often the whole spool is listed, to catch missed file events")
	fl.StringVar(&f.metricsAddr, "metrics-bind-address", "", "serve /metrics, /healthz and /readyz on this address, e.g. :8080 (off when empty)")
	fl.BoolVar(&f.profiling, "profiling", false, "serve Go's profiles (/debug/pprof/) on --metrics-bind-address too")
	fl.BoolVar(&f.noReconcile, "no-reconcile", false, "apply nothing; only load the config for the runs loop")
	fl.BoolVar(&f.noRuns, "no-runs", false, "run no agents; only reconcile")
	fl.DurationVar(&f.interval, "interval", f.interval, "time between periodic reconciles that correct drift (plus up to 10% jitter)")
	fl.DurationVar(&f.debounce, "debounce", f.debounce, "quiet time after a config file change before it is reconciled")
	fl.BoolVar(&f.renderCache, "render-cache", false,
		"keep every company's rendered objects between reconciles, so that a change renders only the companies it touched "+
			"(faster commits in a large fleet, for about 50 KiB of memory a company)")
	md := apply.DefaultManagerOptions()
	f.set.output = "text"
	fl.StringVar(&f.set.name, "applyset", md.ApplySet.Name, "name of the Secret that is the ApplySet parent (inventory)")
	fl.StringVar(&f.set.namespace, "applyset-namespace", md.ApplySet.Namespace, "namespace of the ApplySet parent; created if missing")
	fl.IntVar(&f.set.workers, "workers", md.Workers, "apply requests sent in parallel")
	f.prune.add(fl, "delete members of the ApplySet that are no longer rendered; a prune the guard holds waits for "+
		"approval (pcsync_prune_blocked, /readyz PruneAllowed, and an ERROR log line with the command that approves it)", false)
	addForceConflicts(fl, &f.forceConflicts)
	f.sides.add(fl)
	f.sandbox.add(fl)
	fl.BoolVar(&f.skipNetworkCheck, "skip-network-check", false,
		"do not start a probe pod in a tenant namespace after the first reconcile to prove that its NetworkPolicies are enforced")
	fl.StringVar(&f.shard, "shard", "", "serve only the companies whose label "+config.LabelShard+
		" names this shard (default: those that name none); the Lease and the ApplySet default to pcsync-<shard>")
	fl.BoolVar(&f.leaderElect, "leader-elect", false, "run the loops only while holding the leader Lease (for several replicas)")
	fl.StringVar(&f.leaseNamespace, "leader-election-namespace", "",
		"namespace of the Lease (default $POD_NAMESPACE, else the service account's namespace, else pcsync-system)")
	fl.StringVar(&f.leaseID, "leader-election-id", f.leaseID, "name of the Lease")
	fl.DurationVar(&f.leaseDuration, "leader-election-lease-duration", f.leaseDuration,
		"how long a standby waits before taking over a Lease the leader did not release (it died)")
	fl.DurationVar(&f.renewDeadline, "leader-election-renew-deadline", f.renewDeadline,
		"how long the leader tries to renew before it stops its loops and exits")
	fl.DurationVar(&f.retryDur, "leader-election-retry-period", f.retryDur, "time between attempts to acquire or renew the Lease")
	cmd.AddCommand(newRunShimCmd())
	return cmd
}

// configDir takes the config directory from the DIR argument or from
// --config (its old spelling); giving two different ones is an error.
func (f *daemonFlags) configDir(args []string) error {
	if len(args) == 1 {
		if f.config != "" && f.config != args[0] {
			return usageErrorf("the config directory is given twice: %q and --config %q", args[0], f.config)
		}
		f.config = args[0]
	}
	if f.config == "" {
		return usageErrorf("the config directory is missing: pcsync daemon DIR (or --config DIR)")
	}
	return nil
}

func (f *daemonFlags) run(ctx context.Context, g *globalOptions) error {
	lim, err := f.validate()
	if err != nil {
		return err
	}
	// client-go (leader election) logs through klog: send it to our logger,
	// so that --log-format json holds for every line.
	klog.SetSlogLogger(g.Logger)
	daemon.SetGC(g.Logger)

	if f.once {
		// Report an invalid config line by line, with exit code 1, before
		// anything starts.
		if _, err := config.Load(ctx, f.config, g.loadOptions(f.set.namespace)); err != nil {
			return g.reportConfigError(err)
		}
	}
	opts, err := f.options(ctx, g, lim)
	if err != nil {
		return err
	}
	err = daemon.Run(ctx, opts)
	switch {
	case errors.Is(err, daemon.ErrInvalidConfig):
		return g.reportConfigError(err)
	case err != nil:
		return err
	}
	if f.once && ctx.Err() != nil {
		return errors.New("interrupted before every request had its result; runs still going are adopted by the next daemon")
	}
	g.Logger.Info("daemon stopped", slog.Bool("interrupted", ctx.Err() != nil))
	return nil
}

// validate checks the flags before anything starts and returns the prune
// guard's limits.
func (f *daemonFlags) validate() (apply.ApplyOptions, error) {
	switch f.executor {
	case "local", "kubernetes":
	default:
		return apply.ApplyOptions{}, usageErrorf("--executor %q: want kubernetes or local", f.executor)
	}
	if f.spool == "" && !f.noRuns {
		return apply.ApplyOptions{}, usageErrorf("--spool is required (or --no-runs)")
	}
	if f.noReconcile && f.noRuns && !f.sandbox.enabled {
		return apply.ApplyOptions{}, usageErrorf("--no-reconcile and --no-runs leave nothing to do")
	}
	if err := f.sandbox.validate(f); err != nil {
		return apply.ApplyOptions{}, err
	}
	if err := f.shardNames(); err != nil {
		return apply.ApplyOptions{}, err
	}
	return f.check()
}

// shardNames checks --shard and names the shard's Lease and ApplySet
// after it (pcsync-<shard>) where the flags keep pcsync's defaults.
func (f *daemonFlags) shardNames() error {
	if f.shard == "" {
		return nil
	}
	if msgs := validation.IsDNS1123Label(f.shard); len(msgs) > 0 {
		return usageErrorf("--shard %q: %s", f.shard, msgs[0])
	}
	s := config.Shard(f.shard)
	if base := leader.DefaultOptions().Name; f.leaseID == base {
		f.leaseID = s.Name(base)
	}
	if base := apply.DefaultManagerOptions().ApplySet.Name; f.set.name == base {
		f.set.name = s.Name(base)
	}
	return nil
}

// shardSet is the ApplySet ID of shard s's daemon when it keeps the
// default name (pcsync-<shard>) in this daemon's ApplySet namespace: the
// sets the handover takes companies from.
func (f *daemonFlags) shardSet(s config.Shard) string {
	return apply.ParentID(s.Name(apply.DefaultManagerOptions().ApplySet.Name), f.set.namespace)
}

// reconcileOptions sets the reconcile loop's timing, apply limits, loader
// and renderer from the flags.
func (f *daemonFlags) reconcileOptions(g *globalOptions, ro *reconcile.Options, lim apply.ApplyOptions) {
	ro.Interval, ro.Debounce, ro.Logger = f.interval, f.debounce, g.Logger
	ro.Apply.Prune, ro.Apply.PruneMax, ro.Apply.PruneFloor = lim.Prune, lim.PruneMax, lim.PruneFloor
	ro.Apply.ForceConflicts = f.forceConflicts
	ro.Load, ro.Render = g.loadOptions(f.set.namespace), g.renderOptions()
	if f.renderCache {
		ro.Render.Cache = render.NewCache()
	}
}

// options are the daemon's options for the flags: the reconcile loop (and
// its applier), the runs loop (and its executor), the sandbox provider,
// leader election, and the API server probe when any of them needs the
// cluster.
func (f *daemonFlags) options(ctx context.Context, g *globalOptions, lim apply.ApplyOptions) (daemon.Options, error) {
	opts := daemon.DefaultOptions(f.config)
	opts.Metrics = metrics.New()
	opts.Shard, opts.Reconcile.ShardSet = config.Shard(f.shard), f.shardSet
	// Every client of the daemon's counts its requests
	// (pcsync_kube_api_requests_total).
	g.wrapTransport = opts.Metrics.WrapTransport
	needsCluster := !f.noReconcile && f.executor == "kubernetes" && f.sides.kubernetes ||
		f.leaderElect || (!f.noRuns && f.executor == "kubernetes") || f.sandbox.enabled
	var self *introspect.Self
	if needsCluster {
		cfg, err := g.restConfig()
		if err != nil {
			return opts, err
		}
		self = readOwnPod(ctx, g, cfg)
		g.images = imageDefaults(self)
	}
	opts.Logger, opts.Once, opts.MetricsAddress, opts.Profiling = g.Logger, f.once, f.metricsAddr, f.profiling
	ro := &opts.Reconcile
	f.reconcileOptions(g, ro, lim)
	if err := f.sharedControllers(g, &opts); err != nil {
		return opts, err
	}

	doApply := !f.noReconcile && f.executor == "kubernetes" && f.sides.kubernetes
	if !f.noReconcile && f.sides.paperclip {
		ro.Paperclip = paperclipReconciler(g)
		ro.PaperclipOptions.PauseFloor = lim.PruneFloor
	}
	if needsCluster {
		// /readyz condition APIServerReachable: a cheap GET /readyz of the
		// API server every few seconds.
		cs, err := f.clientset(g, "pcsync-probe")
		if err != nil {
			return opts, err
		}
		opts.APIServer = cs.Discovery().RESTClient()
	}
	if doApply {
		if err := f.applier(g, &opts); err != nil {
			return opts, err
		}
	}
	if !f.noRuns {
		opts.Runs, opts.NewExecutor = f.runs(g, opts.Metrics, self)
	}
	if f.sandbox.enabled {
		if err := f.sandboxOptions(g, &opts, self); err != nil {
			return opts, err
		}
	}
	// Agents run in the cluster: prove that their NetworkPolicies hold.
	if !f.skipNetworkCheck && !f.once && (f.sandbox.enabled || !f.noRuns && f.executor == "kubernetes") {
		cs, err := f.clientset(g, "pcsync-network-check")
		if err != nil {
			return opts, err
		}
		ro.Observe = daemon.NewNetworkCheck(g.Logger, cs, opts.Metrics).Observe(ctx, ro.Observe)
	}
	if f.leaderElect {
		cs, err := f.clientset(g, "pcsync-leader-election")
		if err != nil {
			return opts, err
		}
		lo := leader.DefaultOptions()
		if f.leaseNamespace != "" {
			lo.Namespace = f.leaseNamespace
		}
		lo.Name, lo.Logger = f.leaseID, g.Logger
		lo.LeaseDuration, lo.RenewDeadline, lo.RetryPeriod = f.leaseDuration, f.renewDeadline, f.retryDur
		opts.LeaderElection, opts.LeaseClient = &lo, cs
	}
	return opts, nil
}

// sharedControllers registers, when agents run in the cluster (runs with
// the Kubernetes executor, or the sandbox), the controllers every replica
// runs: those both roads share, and the image preflight. Each config
// loaded gives the egress proxies' scaler its idle periods.
func (f *daemonFlags) sharedControllers(g *globalOptions, opts *daemon.Options) error {
	if (f.noRuns || f.executor != "kubernetes") && !f.sandbox.enabled {
		return nil
	}
	if opts.Health == nil {
		// The daemon's own, given here so that the spend keeper reports to it.
		opts.Health = health.NewChecker()
	}
	sh, err := newShared(g, opts.Metrics, opts.Health)
	if err != nil {
		return err
	}
	f.shared = sh
	opts.Reconcile.OnModel = sh.SetModel
	lo := g.loadOptions(f.set.namespace)
	opts.Controllers = append(opts.Controllers, sh.Controllers()...)
	opts.Controllers = append(opts.Controllers, daemon.ImagePreflight(g.Logger, f.config, lo, imagecheck.DefaultOptions()))
	return nil
}

// runs are the runs loop's options and the executor it starts while this
// replica leads.
func (f *daemonFlags) runs(g *globalOptions, m *metrics.Metrics, self *introspect.Self) (*spool.Options, func(context.Context) (runs.Executor, error)) {
	ropts := spool.DefaultOptions(f.spool)
	if f.stateDir != "" {
		ropts.StateDir = f.stateDir
	}
	ropts.RescanInterval, ropts.Logger, ropts.Version = f.rescan, g.Logger, version
	stateDir := ropts.StateDir
	if f.executor == "kubernetes" {
		// Jobs, log streams and informers live while this replica leads;
		// the Jobs themselves go on, and the next leader adopts them.
		return &ropts, func(ctx context.Context) (runs.Executor, error) {
			return newKubeExecutor(ctx, g, stateDir, m, self, f.shared)
		}
	}
	return &ropts, func(context.Context) (runs.Executor, error) {
		lo, err := localexec.DefaultOptions(stateDir)
		if err != nil {
			return nil, err
		}
		lo.Logger = g.Logger
		return localexec.New(lo)
	}
}

// clientset is a clientset of the cluster of g's flags that names itself
// userAgent, so that the API server's logs tell pcsync's callers apart.
func (f *daemonFlags) clientset(g *globalOptions, userAgent string) (*kubernetes.Clientset, error) {
	cfg, err := g.restConfig()
	if err != nil {
		return nil, err
	}
	cfg.UserAgent = userAgent
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("cluster access: %w", err)
	}
	return cs, nil
}

// newRunShimCmd is the hidden supervisor the local executor starts for
// each run (see localexec.ShimMain); it is not meant to be run by hand.
func newRunShimCmd() *cobra.Command {
	return &cobra.Command{
		Use:                localexec.ShimArg + " --exit-file PATH -- AGENT [ARG...]",
		Short:              "Supervise one local run (used by the local executor)",
		Hidden:             true,
		DisableFlagParsing: true,
		RunE: func(_ *cobra.Command, args []string) error {
			if code := localexec.ShimMain(args); code != 0 {
				return &exitError{code: code, err: fmt.Errorf("agent exited with code %d", code), reported: true}
			}
			return nil
		},
	}
}
