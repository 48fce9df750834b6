package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/pcsync/pcsync/internal/netprobe"
)

// newNetprobeCmd is the hidden probe that pcsync doctor (and the daemon at
// start) runs in a pod of a tenant namespace to prove that its
// NetworkPolicies are enforced (package netprobe): it tries a TCP
// connection to each target and writes one JSON line of outcomes to stdout
// and to the container's termination log.
func newNetprobeCmd(g *globalOptions) *cobra.Command {
	var (
		connect        []string
		opts           = netprobe.DefaultOptions()
		terminationLog string
	)
	cmd := &cobra.Command{
		Use:    "netprobe --connect HOST:PORT[,HOST:PORT...] [--timeout 3s] [--settle 0s] [--attempts 1] [--interval 1s]",
		Short:  "Try TCP connections and report each outcome (used by pcsync doctor's network check)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			var targets []string
			for _, t := range connect {
				if t = strings.TrimSpace(t); t != "" {
					targets = append(targets, t)
				}
			}
			if len(targets) == 0 {
				return usageErrorf("--connect: no target")
			}
			if opts.Timeout <= 0 || opts.Interval <= 0 || opts.Attempts <= 0 || opts.Settle < 0 {
				return usageErrorf("--timeout, --interval and --attempts must be positive, --settle not negative")
			}
			line := append(netprobe.Probe(c.Context(), targets, opts).Encode(), '\n')
			if _, err := g.Stdout.Write(line); err != nil {
				return err
			}
			if terminationLog == "" {
				return nil
			}
			// A failure here exits non-zero, so that the kubelet's
			// FallbackToLogsOnError takes the line from the log instead.
			if err := os.WriteFile(terminationLog, line, 0o644); err != nil {
				return fmt.Errorf("termination log: %w", err)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringSliceVar(&connect, "connect", nil, "targets to connect to, HOST:PORT, comma-separated or repeated")
	f.DurationVar(&opts.Timeout, "timeout", opts.Timeout, "how long each connection attempt may take")
	f.DurationVar(&opts.Settle, "settle", opts.Settle, "wait this long before the first attempt (an enforcer may write a new pod's rules late)")
	f.IntVar(&opts.Attempts, "attempts", opts.Attempts, "attempts per target; the last one's outcome counts")
	f.DurationVar(&opts.Interval, "interval", opts.Interval, "time between two attempts at a target")
	f.StringVar(&terminationLog, "termination-log", "/dev/termination-log", "file that receives the report too (empty: none)")
	return cmd
}
