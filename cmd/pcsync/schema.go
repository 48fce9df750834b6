package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/pcsync/pcsync/pkg/jsonschema"
)

func newSchemaCmd(g *globalOptions) *cobra.Command {
	var (
		kind, outFile, output string
		compact               bool
	)
	cmd := &cobra.Command{
		Use:   "schema [--kind config|run] [--output-file FILE]",
		Short: "Print the JSON Schema of config documents (or run requests), for editors",
		Long: `schema prints the JSON Schema (draft 2020-12) of pcsync's config documents,
generated from the CUE schema that validate uses, so that editors (the YAML
language server in VS Code, Neovim, IntelliJ) check and complete config files
as you type. Defaults, enums, patterns, bounds and field descriptions come from
the CUE schema; rules across documents (unique slugs, the image allow-list, …)
are only checked by pcsync validate.

  pcsync schema --output-file .vscode/pcsync.schema.json

then start each config file with

  # yaml-language-server: $schema=../.vscode/pcsync.schema.json

or map a glob to it in the editor's settings (see docs/cli.md).
--kind run prints the schema of spool run requests instead.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutputMoved(output, schemaFormats, "--output-file"); err != nil {
				return err
			}
			opts := jsonschema.DefaultOptions()
			switch kind {
			case "config":
			case "run":
				opts.Kinds = []string{"Run"}
			default:
				return usageErrorf("--kind %q: want config or run", kind)
			}
			if compact {
				opts.Indent = ""
			}
			b, err := jsonschema.Export(opts)
			if err != nil {
				return err
			}
			b = append(b, '\n')
			if outFile == "" || outFile == "-" {
				_, err = g.Stdout.Write(b)
				return err
			}
			return writeFileAtomic(outFile, b)
		},
	}
	cmd.Flags().StringVar(&kind, "kind", "config", "which documents: config (Settings and Company) or run (spool requests)")
	setFlagValues(cmd.Flags(), "kind", "config", "run")
	addOutputFlag(cmd.Flags(), &output, schemaFormats)
	cmd.Flags().StringVar(&outFile, "output-file", "", "write to this file instead of stdout (- for stdout)")
	cmd.Flags().BoolVar(&compact, "compact", false, "compact JSON instead of indented")
	return cmd
}

// writeFileAtomic writes data to path through a temporary file and a rename,
// so that an editor never reads half a schema.
func writeFileAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("schema: %w", err)
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return fmt.Errorf("schema: %w", err)
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("schema: %w", err)
	}
	if err := f.Chmod(0o644); err != nil {
		f.Close()
		return fmt.Errorf("schema: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("schema: %w", err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("schema: %w", err)
	}
	return nil
}
