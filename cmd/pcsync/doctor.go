package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/pcsync/pcsync/internal/doctor"
)

// errChecksFailed is what doctor returns (exit code 1) when a check failed.
var errChecksFailed = errors.New("checks failed")

// doctorLong is the help of pcsync doctor.
const doctorLong = `doctor checks, and prints one row per check:

  config    DIR (when given) is valid
  cluster   the cluster is reachable, and its version
  rbac      every verb pcsync uses is allowed (SelfSubjectAccessReview), as
            deploy/base/rbac.yaml grants them
  crds      every kind the config renders is served (Cilium's CRDs in
            egress mode cilium)
  inherit   pcsync's own pod, when it runs in one, and what agent Jobs
            inherit from it (imagePullSecrets, dnsConfig; Settings spec.inherit)
  sessions  each sessions PVC is Bound and ReadWriteMany
  secrets   the Secrets the config names exist in the tenant namespaces
            (secretRefs, imagePullSecrets; optional secretRefs as warnings)
  network   the tenants' NetworkPolicies are enforced: a short-lived probe
            pod in the first applied tenant namespace (pcsync's image,
            hardened and labelled as that company's agents) tries TCP
            connections its policies forbid (the kubelet port of its own
            node, the API server's address): one that connects fails
            ("NetworkPolicies are not enforced on this cluster: agents are
            not isolated", naming the network plugin when it can tell); a
            probe that never reports fails too (fail closed); the pod is
            deleted in every case. --skip-network-check leaves it out.
  spool     --spool is a writable directory
  daemon    a daemon serves --spool: its status file (<state>/status.json)
            has a fresh heartbeat (warning when none runs, failure when it
            is stuck or died without stopping)

Exit code 0 when nothing failed (warnings allowed), 1 when a check failed,
2 for usage errors.`

func newDoctorCmd(g *globalOptions) *cobra.Command {
	var (
		spool, stateDir, leaseNS, output string
		skipNetwork                      bool
		networkTimeout                   time.Duration
		kubeletPort                      int
	)
	cmd := &cobra.Command{
		Use:   "doctor [DIR] [--spool DIR]",
		Short: "Check that pcsync can do its work here: cluster, permissions, CRDs, volumes, Secrets, spool",
		Long:  doctorLong,
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output, tableFormats); err != nil {
				return err
			}
			if cmd.Flags().Changed("skip-network") {
				fmt.Fprintln(g.Stderr, "warning: --skip-network is deprecated: use --skip-network-check")
			}
			opts := doctor.DefaultOptions()
			if len(args) > 0 {
				opts.ConfigDir = args[0]
			}
			opts.Spool, opts.StateDir = spool, stateDir
			opts.SkipNetwork, opts.Network.Timeout, opts.Network.KubeletPort = skipNetwork, networkTimeout, kubeletPort
			opts.Images = imageDefaults(nil)
			if leaseNS != "" {
				opts.LeaseNamespace = leaseNS
			}
			cfg, err := g.restConfig()
			if err != nil {
				opts.ClusterError = err
			} else {
				cfg.UserAgent = "pcsync-doctor"
				opts.RESTConfig = cfg
			}
			r := doctor.Run(cmd.Context(), opts)
			if output == "json" {
				err = r.WriteJSON(g.Stdout)
			} else {
				err = r.WriteTable(g.Stdout)
			}
			if err != nil {
				return err
			}
			if n := r.Count(doctor.StatusFail); n > 0 {
				return &exitError{code: 1, err: fmt.Errorf("%w: %d of %d", errChecksFailed, n, len(r.Checks))}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&spool, "spool", "", "spool directory to check for writing, and whose daemon to check")
	f.StringVar(&stateDir, "state-dir", "", "the daemon's state directory (default <spool>/.pcsync)")
	f.StringVar(&leaseNS, "leader-election-namespace", "",
		"namespace of the leader Lease (default $POD_NAMESPACE, else the service account's namespace, else pcsync-system)")
	addOutputFlag(f, &output, tableFormats)
	// The daemon's name for it. --skip-network, doctor's own before, is
	// hidden and warns: not pflag's MarkDeprecated, whose notice cobra
	// prints on stdout, in front of -o json.
	f.BoolVar(&skipNetwork, "skip-network-check", false, "leave out the network check (no probe pod is started)")
	f.BoolVar(&skipNetwork, "skip-network", false, "deprecated: use --skip-network-check")
	_ = f.MarkHidden("skip-network")
	f.DurationVar(&networkTimeout, "network-timeout", doctor.DefaultNetworkOptions().Timeout,
		"how long the network check's probe pod may take to report, its image pull included")
	f.IntVar(&kubeletPort, "kubelet-port", doctor.DefaultNetworkOptions().KubeletPort,
		"the kubelet port the network check's probe tries on its own node (default: the port its Node reports)")
	return cmd
}
