package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

func newValidateCmd(g *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "validate [DIR]",
		Short: "Check a config directory against the schema and the rules across documents",
		Long: `validate loads every *.yaml and *.yml file under DIR (default "."), checks each
document against the CUE schema and the rules across documents, and renders the
manifests (so that patches are checked too). Every problem prints as one line,
path:line:col: field.path: message. Exit code 1 when the config is invalid.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := dirArg(args)
			out, err := g.loadAndRender(cmd.Context(), dir)
			if err != nil {
				return err
			}
			fmt.Fprintf(g.Stdout, "%s: valid: %d companies, %d objects\n", dir, len(out.Companies), len(out.Objects))
			return nil
		},
	}
}
