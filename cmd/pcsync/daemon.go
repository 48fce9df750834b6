package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/spf13/cobra"

	"github.com/pcsync/pcsync/pkg/config"
	"github.com/pcsync/pcsync/pkg/health"
	"github.com/pcsync/pcsync/pkg/metrics"
	"github.com/pcsync/pcsync/pkg/runs"
)

// daemonFlags are the flags of `pcsync daemon`.
type daemonFlags struct {
	config, spool, stateDir, executor, metricsAddr string
	once                                           bool
	rescan                                         time.Duration
}

func newDaemonCmd(g *globalOptions) *cobra.Command {
	f := daemonFlags{executor: "kubernetes", rescan: runs.DefaultOptions("").RescanInterval}
	cmd := &cobra.Command{
		Use:   "daemon --config DIR --spool DIR [--executor kubernetes|local] [--once]",
		Short: "Run the agent work requested by files dropped into a spool directory",
		Long: `daemon watches the spool directory for run requests (<name>.json or <name>.yaml,
written as a hidden or .tmp file and renamed in), validates each against the Run
schema and the config, queues them per agent (FIFO, at most the agent's
concurrency at once) and runs them: with --executor kubernetes (the default) as
hardened Jobs in the tenant namespaces (see docs/kubernetes-executor.md), with
--executor local as local processes, no cluster needed. Output streams to
<name>.log; the result is written once to <name>.result.json. <name>.cancel cancels a run. A restarted daemon adopts the
runs the previous one left running; no run ever runs twice.

--once handles every request present at start, waits for all their results and
exits 0; failed runs are results, not daemon errors. See docs/runs.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return f.run(cmd.Context(), g) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.config, "config", "", "config directory (required)")
	fl.StringVar(&f.spool, "spool", "", "spool directory of run requests (required)")
	fl.StringVar(&f.executor, "executor", f.executor, "where runs execute: kubernetes or local")
	fl.BoolVar(&f.once, "once", false, "handle the requests present at start, wait for their results, exit")
	fl.StringVar(&f.stateDir, "state-dir", "", "daemon state directory (default <spool>/.pcsync)")
	fl.DurationVar(&f.rescan, "rescan-interval", f.rescan, "how often the whole spool is listed, to catch missed file events")
	fl.StringVar(&f.metricsAddr, "metrics-bind-address", "", "serve /metrics, /healthz and /readyz on this address (off when empty)")
	_ = cmd.MarkFlagRequired("config")
	_ = cmd.MarkFlagRequired("spool")
	cmd.AddCommand(newRunShimCmd())
	return cmd
}

func (f *daemonFlags) run(ctx context.Context, g *globalOptions) error {
	switch f.executor {
	case "local", "kubernetes":
	default:
		return usageErrorf("--executor %q: want kubernetes or local", f.executor)
	}
	m, err := config.Load(ctx, f.config, config.DefaultLoadOptions())
	if err != nil {
		return g.reportConfigError(err)
	}
	for _, w := range m.Warnings {
		g.Logger.Warn("config warning", slog.String("warning", w.String()))
	}
	opts := runs.DefaultOptions(f.spool)
	if f.stateDir != "" {
		opts.StateDir = f.stateDir
	}
	opts.Once, opts.RescanInterval, opts.Logger = f.once, f.rescan, g.Logger
	var exec runs.Executor
	if f.executor == "kubernetes" {
		// Jobs, log streams and informers live until ctx ends; the Jobs
		// themselves go on, and the next daemon adopts them.
		if exec, err = newKubeExecutor(ctx, g, opts.StateDir); err != nil {
			return err
		}
	} else {
		lo, err := runs.DefaultLocalOptions(opts.StateDir)
		if err != nil {
			return err
		}
		lo.Logger = g.Logger
		if exec, err = runs.NewLocalExecutor(lo); err != nil {
			return err
		}
	}
	if f.metricsAddr != "" {
		opts.Metrics = metrics.New()
		checker := health.NewChecker()
		checker.Set("SpoolServed", true, true, "DaemonStarted", "the daemon serves "+f.spool)
		ln, err := net.Listen("tcp", f.metricsAddr)
		if err != nil {
			return fmt.Errorf("--metrics-bind-address: %w", err)
		}
		srv := &http.Server{Handler: checker.Mux(opts.Metrics.Handler()), ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = srv.Serve(ln) }()
		defer srv.Close()
	}
	d, err := runs.New(m, exec, opts)
	if err != nil {
		return err
	}
	if err := d.Run(ctx); err != nil {
		return err
	}
	if f.once && ctx.Err() != nil {
		return errors.New("interrupted before every request had its result; runs still going are adopted by the next daemon")
	}
	return nil
}

// newRunShimCmd is the hidden supervisor the local executor starts for
// each run (see runs.ShimMain); it is not meant to be run by hand.
func newRunShimCmd() *cobra.Command {
	return &cobra.Command{
		Use:                runs.ShimArg + " --exit-file PATH -- AGENT [ARG...]",
		Short:              "Supervise one local run (used by the local executor)",
		Hidden:             true,
		DisableFlagParsing: true,
		RunE: func(_ *cobra.Command, args []string) error {
			if code := runs.ShimMain(args); code != 0 {
				return &exitError{code: code, err: fmt.Errorf("agent exited with code %d", code), reported: true}
			}
			return nil
		},
	}
}
