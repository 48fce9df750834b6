package main

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/pcsync/pcsync/pkg/egressproxy/ghsocket"
	"github.com/pcsync/pcsync/pkg/procinit"
)

// newInitCmd is the hidden PID 1 of an agent container (package procinit).
func newInitCmd(g *globalOptions) *cobra.Command {
	var record string
	var waitProxy bool
	var grace time.Duration
	cmd := &cobra.Command{
		Use:   "init [--record FILE] [--wait-proxy | --proxy-grace D] -- CMD [ARG…]",
		Short: "Run CMD as PID 1 of a container: forward signals to its process group, reap orphans",
		Long: `init runs CMD in a process group of its own, forwards every catchable
signal it gets to that group, reaps every child and orphan, and exits with
CMD's status (128+n when signal n ended it). When CMD ends it appends the
start, end and status to FILE (default the container's termination log),
which pcsync's Kubernetes executor reads for the run's duration. With
--wait-proxy, CMD starts once the egress proxy of $HTTPS_PROXY accepts a
connection (a proxy scaled up from zero may start after the pod); with
--proxy-grace D, once it answers or D has passed, whichever is first (a
proxy that is up, which a new pod's network policy may let it reach a
moment late). When $PCSYNC_GITHUB_ROUTE names a GitHub credential's route,
it first serves the GitHub CLI's socket in $GH_CONFIG_DIR.`,
		Hidden:                true,
		Args:                  cobra.MinimumNArgs(1),
		DisableFlagsInUseLine: true,
		RunE: func(c *cobra.Command, args []string) error {
			opts := procinit.DefaultOptions(args)
			opts.RecordFile = record
			opts.Stderr = g.Stderr
			if waitProxy || grace > 0 {
				opts.WaitProxy = os.Getenv("HTTPS_PROXY")
			}
			if !waitProxy {
				opts.ProxyGrace = grace
			}
			// A GitHub credential's route for gh (package ghsocket): a
			// socket that cannot start is said in the run's log; the CLI
			// runs all the same. In a lease, where init is a command of
			// the command server, the server serves it.
			if gh, ok, err := ghsocket.FromEnv(os.Environ()); ok {
				if err == nil {
					_, err = ghsocket.Start(c.Context(), gh)
				}
				if err != nil && !errors.Is(err, ghsocket.ErrServed) {
					fmt.Fprintf(g.Stderr, "pcsync init: the GitHub CLI's socket: %v\n", err)
				}
			}
			if code := procinit.Run(opts); code != 0 {
				return &exitError{code: code, err: fmt.Errorf("%s exited with status %d", args[0], code), reported: true}
			}
			return nil
		},
	}
	cmd.Flags().SetInterspersed(false)
	cmd.Flags().StringVar(&record, "record", procinit.DefaultRecordFile, `file the start, end and status are appended to ("-": none)`)
	cmd.Flags().BoolVar(&waitProxy, "wait-proxy", false, "start CMD once the egress proxy of $HTTPS_PROXY accepts a connection (none set: at once)")
	cmd.Flags().DurationVar(&grace, "proxy-grace", 0, "start CMD once the egress proxy of $HTTPS_PROXY answers once, or after this long without an answer (--wait-proxy wins)")
	return cmd
}
