package main

import (
	"github.com/spf13/cobra"

	"github.com/pcsync/pcsync/pkg/sandbox/cmdserver"
)

// newSandboxServerCmd is the hidden command server of a sandbox pod and
// the relay a Kubernetes exec runs to reach it (see package cmdserver).
func newSandboxServerCmd(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:    "sandbox-server",
		Short:  "Run or reach the command server of a sandbox pod (used by the daemon)",
		Hidden: true,
		Args:   cobra.NoArgs,
	}

	var serveSocket string
	serve := &cobra.Command{
		Use:   "serve --socket PATH",
		Short: "Serve commands on a Unix socket until Shutdown or SIGTERM",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			opts := cmdserver.DefaultOptions()
			opts.Socket = serveSocket
			opts.Logger = g.Logger
			return cmdserver.Serve(c.Context(), opts)
		},
	}
	serve.Flags().StringVar(&serveSocket, "socket", cmdserver.DefaultSocket, "Unix socket to listen on")

	var attachSocket string
	var spawn bool
	attach := &cobra.Command{
		Use:   "attach --socket PATH [--spawn]",
		Short: "Relay stdin and stdout to the command server's socket",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			opts := cmdserver.DefaultAttachOptions()
			opts.Socket, opts.Spawn = attachSocket, spawn
			opts.Stdin, opts.Stdout, opts.Logger = c.InOrStdin(), g.Stdout, g.Logger
			return cmdserver.Attach(c.Context(), opts)
		},
	}
	attach.Flags().StringVar(&attachSocket, "socket", cmdserver.DefaultSocket, "Unix socket of the server")
	attach.Flags().BoolVar(&spawn, "spawn", false, "start a detached server if none listens")

	cmd.AddCommand(serve, attach, newSandboxInstallCmd(), newSandboxHoldCmd())
	return cmd
}
