package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/pcsync/pcsync/pkg/apply"
)

func newDiffCmd(g *globalOptions) *cobra.Command {
	var (
		set   applySetFlags
		opts  = apply.DefaultDiffOptions()
		prune pruneFlags
	)
	cmd := &cobra.Command{
		Use:   "diff [DIR]",
		Short: "Show what apply would change in the cluster",
		Long: `diff validates and renders DIR (default ".") and, like kubectl diff, shows for each
object a unified diff between the live object and the result of a server-side
dry-run apply, without managedFields, resourceVersion, generation, uid,
creationTimestamp and status. Secret values are masked as kubectl diff masks them
("***", "*** (before)", "*** (after)"). The dry run takes back fields another
field manager changed, as apply does (--force-conflicts, the default), so the
diff shows exactly what apply would change, drift included. With --prune, members
of the ApplySet that apply --prune would delete are shown as deletions, and a
prune the guard would hold is named on stderr. Nothing is written.

Exit code: 0 no differences, 1 differences (or an invalid config), 2 or more when
the API server refuses (or with --force-conflicts=false, a conflict). A summary
line goes to stderr.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := set.validate(); err != nil {
				return err
			}
			lim, err := prune.limits()
			if err != nil {
				return err
			}
			opts.Prune, opts.PruneMax, opts.PruneFloor, opts.AllowMassPrune =
				lim.Prune, lim.PruneMax, lim.PruneFloor, lim.AllowMassPrune
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
			if h := d.PruneHeld; h != nil {
				fmt.Fprintf(g.Stderr, "diff: apply --prune would refuse this prune: %s; to approve exactly this prune: %s\n",
					h.Describe(), h.ApproveCommand(d.Parent))
			}
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
	prune.add(f, "show members that apply --prune would delete, as deletions", true)
	addForceConflicts(f, &opts.ForceConflicts)
	f.IntVarP(&opts.Context, "unified", "U", 3, "lines of context around each change")
	return cmd
}
