package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/pcsync/pcsync/pkg/apply"
	"github.com/pcsync/pcsync/pkg/config"
	"github.com/pcsync/pcsync/pkg/render"
)

// validateLong is the help of pcsync validate.
const validateLong = `validate checks a config directory DIR (default "."), or the files given (- for
standard input), against the CUE schema and the rules across documents, and
renders the manifests (so that patches are checked too). Every problem prints as
one line, path:line:col: field.path: message, the path of standard input being
<stdin>. Exit code 1 when the config is invalid, 2 when a file cannot be read.

Files given (a pre-commit hook's, an editor's) are checked as a config directory
of just those files: the rules across documents see only their documents, the
schema's defaults stand in for a Settings document none of them holds (a warning
says so), and the patch files they name must lie under the current directory.
A directory, or files, holding no Settings or Company document validates with a
warning.

A company may not render to a namespace Kubernetes or pcsync needs: kube-system,
kube-public, kube-node-lease, default, Settings spec.server.namespace, the
ApplySet parent's (--applyset-namespace) and the one pcsync runs in
($POD_NAMESPACE, else its service account's).`

// stdinName names standard input in errors and warnings.
const stdinName = "<stdin>"

func newValidateCmd(g *globalOptions) *cobra.Command {
	var applySetNamespace string
	cmd := &cobra.Command{
		Use:   "validate [DIR | FILE... | -]",
		Short: "Check a config directory, or files, against the schema and the rules across documents",
		Long:  validateLong,
		RunE: func(cmd *cobra.Command, args []string) error {
			in, err := validateInputOf(args, cmd.InOrStdin())
			if err != nil {
				return err
			}
			m, out, err := in.load(cmd.Context(), g, applySetNamespace)
			if err != nil {
				return err
			}
			switch {
			case m.Empty():
				fmt.Fprintf(g.Stderr, "%s: warning: no Settings or Company document\n", in.label)
			case in.files != nil && !m.HasSettings():
				fmt.Fprintf(g.Stderr, "%s: warning: no Settings document among the files: checked with Settings' defaults\n", in.label)
			}
			fmt.Fprintf(g.Stdout, "%s: valid: %d companies, %d objects\n", in.label, len(out.Companies), len(out.Objects))
			return nil
		},
	}
	cmd.Flags().StringVar(&applySetNamespace, "applyset-namespace", apply.DefaultManagerOptions().ApplySet.Namespace,
		"namespace of the ApplySet parent that apply and the daemon use; no company may render to it")
	return cmd
}

// validateInput is what validate checks: a directory, or files.
type validateInput struct {
	// dir is the directory, when files is nil.
	dir   string
	files []config.File
	// label names the input in validate's result line: the directory, the
	// file, or how many files.
	label string
}

// validateInputOf reads validate's arguments: none or one directory, else
// files and - (standard input, read from stdin, at most once).
func validateInputOf(args []string, stdin io.Reader) (validateInput, error) {
	if len(args) == 0 {
		return validateInput{dir: ".", label: "."}, nil
	}
	if len(args) == 1 && isDir(args[0]) {
		return validateInput{dir: args[0], label: args[0]}, nil
	}
	in := validateInput{label: fmt.Sprintf("%d files", len(args))}
	for _, a := range args {
		switch {
		case a == "-":
			for _, f := range in.files {
				if f.Data != nil {
					return in, usageErrorf("- (standard input) is given twice")
				}
			}
			limit := config.DefaultLoadOptions().MaxFileSize
			data, err := io.ReadAll(io.LimitReader(stdin, limit+1))
			if err != nil {
				return in, fmt.Errorf("standard input: %w", err)
			}
			// Data, even empty, is what the loader reads instead of a file.
			in.files = append(in.files, config.File{Name: stdinName, Data: append([]byte{}, data...)})
		case isDir(a):
			return in, usageErrorf("%s is a directory: give one directory, or files", a)
		default:
			in.files = append(in.files, config.File{Name: a})
		}
	}
	if len(in.files) == 1 {
		in.label = in.files[0].Name
	}
	return in, nil
}

// load loads and renders the input as loadModelAndRender does; files are
// checked with the current directory as their config directory.
func (in validateInput) load(ctx context.Context, g *globalOptions, applySetNamespace string) (*config.Model, *render.Output, error) {
	if in.files == nil {
		return g.loadModelAndRender(ctx, in.dir, applySetNamespace)
	}
	return g.renderModel(config.LoadFiles(ctx, ".", in.files, g.loadOptions(applySetNamespace)))
}

// isDir reports whether path is a directory (or a link to one).
func isDir(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.IsDir()
}
