package main

import (
	"github.com/spf13/cobra"

	"github.com/pcsync/pcsync/pkg/render"
)

// renderLong is the help of pcsync render.
const renderLong = `render validates DIR (default ".") and prints every company's tenant manifests
on stdout: one YAML stream (-o yaml, the default) or one kubectl List (-o json).
With --output-dir it writes one file per company (<slug>.yaml) and a
kustomization.yaml listing them into a directory instead, ready to commit for
Argo CD or Flux. The output is deterministic.`

func newRenderCmd(g *globalOptions) *cobra.Command {
	var outDir, output string
	cmd := &cobra.Command{
		Use:   "render [DIR] [-o yaml|json | --output-dir DIR]",
		Short: "Print the tenant manifests of a config directory",
		Long:  renderLong,
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkRenderFlags(cmd, output, outDir); err != nil {
				return err
			}
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
			encode := out.YAML
			if output == "json" {
				encode = out.JSON
			}
			b, err := encode()
			if err != nil {
				return err
			}
			_, err = g.Stdout.Write(b)
			return err
		},
	}
	addOutputFlag(cmd.Flags(), &output, manifestFormats)
	cmd.Flags().StringVar(&outDir, "output-dir", "", "write <slug>.yaml per company and a kustomization.yaml into this directory instead")
	return cmd
}

// checkRenderFlags refuses an -o that is not a format (render -o DIR wrote
// a directory before pcsync took kubectl's -o) and -o with --output-dir.
func checkRenderFlags(cmd *cobra.Command, output, outDir string) error {
	if err := checkOutputMoved(output, manifestFormats, "--output-dir"); err != nil {
		return err
	}
	if outDir != "" && cmd.Flags().Changed("output") {
		return usageErrorf("--output-dir writes YAML files: leave out --output %s", output)
	}
	return nil
}
