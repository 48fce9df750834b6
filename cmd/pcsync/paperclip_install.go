package main

import (
	"github.com/spf13/cobra"

	"github.com/pcsync/pcsync/internal/paperclipinstall"
)

// newPaperclipCmd is `pcsync paperclip`, what pcsync does to the Paperclip
// server it sits beside.
func newPaperclipCmd(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "paperclip",
		Short: "Put pcsync's adapter and sandbox plugin into the Paperclip server beside it",
	}
	cmd.AddCommand(newPaperclipInstallCmd(g))
	return cmd
}

func newPaperclipInstallCmd(g *globalOptions) *cobra.Command {
	o := paperclipinstall.DefaultOptions()
	cmd := &cobra.Command{
		Use:   "install --into DIR --paperclip-home DIR",
		Short: "Copy pcsync's Paperclip adapter and plugin into DIR and record the adapter in Paperclip's store",
		Long: `install copies the adapter (@pcsync/paperclip-adapter, adapter type "pcsync") and the
sandbox plugin (@pcsync/paperclip-sandbox, provider "pcsync") that pcsync's image holds into
--into, a directory the Paperclip container mounts at the same path, and records the adapter
in Paperclip's external-adapter store (<paperclip-home>/adapter-plugins.json), which Paperclip
loads at start. Paperclip installs the plugin itself at start when its container has
PAPERCLIP_KUBERNETES_PLUGIN_PATH=<into>/plugin. Run it as an init container of the Paperclip
pod, before Paperclip starts (deploy/paperclip does). It is idempotent: the copies are
replaced whole, and a record of the same version and path is kept as it is.`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			o.Logger = g.Logger
			_, err := paperclipinstall.Install(o)
			return err
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&o.Into, "into", "", "directory shared with the Paperclip container, at the same path there (required)")
	fl.StringVar(&o.Home, "paperclip-home", "", "Paperclip's home, PAPERCLIP_HOME (required; /paperclip in Paperclip's published image)")
	fl.StringVar(&o.From, "from", o.From, "where the packages are (pcsync's image holds them here)")
	_ = cmd.MarkFlagRequired("into")
	_ = cmd.MarkFlagRequired("paperclip-home")
	return cmd
}
