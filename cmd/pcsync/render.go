package main

import (
	"github.com/spf13/cobra"

	"github.com/pcsync/pcsync/pkg/render"
)

func newRenderCmd(g *globalOptions) *cobra.Command {
	var outDir string
	cmd := &cobra.Command{
		Use:   "render [DIR]",
		Short: "Print the tenant manifests of a config directory",
		Long: `render validates DIR (default ".") and prints every company's tenant manifests
as one YAML stream on stdout, or with -o writes one file per company
(<slug>.yaml) and a kustomization.yaml listing them into a directory, ready to
commit for ArgoCD or Flux. The output is deterministic.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			out, err := g.loadAndRender(cmd.Context(), dirArg(args), "")
			if err != nil {
				return err
			}
			if outDir != "" {
				if err := render.WriteDir(out, outDir); err != nil {
					return err
				}
				g.Logger.Debug("rendered", "dir", outDir, "companies", len(out.Companies), "objects", len(out.Objects))
				return nil
			}
			y, err := out.YAML()
			if err != nil {
				return err
			}
			_, err = g.Stdout.Write(y)
			return err
		},
	}
	cmd.Flags().StringVarP(&outDir, "output-dir", "o", "", "write <slug>.yaml per company and a kustomization.yaml into this directory")
	return cmd
}
