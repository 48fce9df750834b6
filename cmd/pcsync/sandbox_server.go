package main

import (
	"github.com/spf13/cobra"

	"github.com/pcsync/pcsync/pkg/egressproxy/ghsocket"
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
	var ownerPID int
	serve := &cobra.Command{
		Use:   "serve --socket PATH [--owner-pid PID]",
		Short: "Serve commands on a Unix socket until Shutdown, SIGTERM, its socket's removal or its owner's end",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			closed, err := cmdserver.CloseInherited()
			if err != nil {
				return err
			}
			opts := cmdserver.DefaultOptions()
			opts.Socket, opts.OwnerPID = serveSocket, ownerPID
			opts.Logger = g.Logger
			opts.Prepare = ghsocket.NewStarter(c.Context(), g.Logger).Ensure
			if len(closed) > 0 {
				g.Logger.Debug("command server closed inherited files", "fds", closed)
			}
			return cmdserver.Serve(c.Context(), opts)
		},
	}
	serve.Flags().StringVar(&serveSocket, "socket", cmdserver.DefaultSocket, "Unix socket to listen on")
	serve.Flags().IntVar(&ownerPID, "owner-pid", 0, "stop when this process ends (0: none)")

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
