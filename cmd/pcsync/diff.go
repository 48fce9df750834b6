package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/pcsync/pcsync/pkg/apply"
)

func newDiffCmd(g *globalOptions) *cobra.Command {
	var (
		set  applySetFlags
		opts = apply.DefaultDiffOptions()
	)
	cmd := &cobra.Command{
		Use:   "diff [DIR]",
		Short: "Show what apply would change in the cluster",
		Long: `diff validates and renders DIR (default ".") and, like kubectl diff, shows for each
object a unified diff between the live object and the result of a server-side
dry-run apply, without managedFields, resourceVersion, generation, uid,
creationTimestamp and status. Secret values are masked as kubectl diff masks them
("***", "*** (before)", "*** (after)"). With --prune, members of the ApplySet that
apply --prune would delete are shown as deletions. Nothing is written.

Exit code: 0 no differences, 1 differences (or an invalid config), 2 or more on
errors. A summary line goes to stderr.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := set.validate(); err != nil {
				return err
			}
			out, err := g.loadAndRender(cmd.Context(), dirArg(args))
			if err != nil {
				return err
			}
			m, err := set.manager(g)
			if err != nil {
				return err
			}
			d, err := m.Diff(cmd.Context(), out.Objects, opts)
			if err != nil {
				return &exitError{code: 2, err: err}
			}
			if set.output == "json" {
				err = d.WriteJSON(g.Stdout)
			} else {
				err = d.WriteText(g.Stdout)
			}
			err = errors.Join(err, d.WriteErrors(g.Stderr))
			fmt.Fprintln(g.Stderr, d.SummaryLine())
			if err != nil {
				return &exitError{code: 2, err: err}
			}
			if failed := d.Count(apply.ActionFailed); failed > 0 {
				return &exitError{code: 2, err: fmt.Errorf("%d of %d objects could not be diffed", failed, len(d.Objects))}
			}
			if d.Changed() {
				return &exitError{code: 1, err: errDifferences, reported: true}
			}
			return nil
		},
	}
	f := cmd.Flags()
	set.add(f)
	f.BoolVar(&opts.Prune, "prune", false, "show members that apply --prune would delete, as deletions")
	f.BoolVar(&opts.ForceConflicts, "force-conflicts", false,
		"dry-run with conflicts forced (what apply --force-conflicts would do)")
	f.IntVarP(&opts.Context, "unified", "U", 3, "lines of context around each change")
	return cmd
}
