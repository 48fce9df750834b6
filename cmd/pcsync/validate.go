package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/pcsync/pcsync/pkg/apply"
)

func newValidateCmd(g *globalOptions) *cobra.Command {
	var applySetNamespace string
	cmd := &cobra.Command{
		Use:   "validate [DIR]",
		Short: "Check a config directory against the schema and the rules across documents",
		Long: `validate loads every *.yaml and *.yml file under DIR (default "."), checks each
document against the CUE schema and the rules across documents, and renders the
manifests (so that patches are checked too). Every problem prints as one line,
path:line:col: field.path: message. Exit code 1 when the config is invalid.

A company may not render to a namespace Kubernetes or pcsync needs: kube-system,
kube-public, kube-node-lease, default, Settings spec.server.namespace, the
ApplySet parent's (--applyset-namespace) and the one pcsync runs in
($POD_NAMESPACE, else its service account's).`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := dirArg(args)
			out, err := g.loadAndRender(cmd.Context(), dir, applySetNamespace)
			if err != nil {
				return err
			}
			fmt.Fprintf(g.Stdout, "%s: valid: %d companies, %d objects\n", dir, len(out.Companies), len(out.Objects))
			return nil
		},
	}
	cmd.Flags().StringVar(&applySetNamespace, "applyset-namespace", apply.DefaultManagerOptions().ApplySet.Namespace,
		"namespace of the ApplySet parent that apply and the daemon use; no company may render to it")
	return cmd
}
