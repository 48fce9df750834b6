package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/pcsync/pcsync/pkg/apply"
	"github.com/pcsync/pcsync/pkg/paperclip"
)

// diffLong is the help of pcsync diff.
const diffLong = `diff validates and renders DIR (default ".") and, like kubectl diff, shows for each
object a unified diff between the live object and the result of a server-side
dry-run apply, without managedFields, resourceVersion, generation, uid,
creationTimestamp and status. Secret values are masked as kubectl diff masks them
("***", "*** (before)", "*** (after)"). The dry run takes back fields another
field manager changed, as apply does (--force-conflicts, the default), so the
diff shows exactly what apply would change, drift included. With --prune, members
of the ApplySet that apply --prune would delete are shown as deletions, and a
prune the guard would hold is named on stderr. Nothing is written.

Companies with spec.paperclip.manage also show their Paperclip agents' changes:
a unified diff of the managed fields per agent ("live/paperclip/<company>/agents/
<agent>" against "declared/…"), reading only. --paperclip=false leaves that side
out; --kubernetes=false shows only it (no cluster needed).

Exit code, as kubectl diff's: 0 no differences, 1 differences, 2 or more for an
error: an invalid config, a usage error, the API server refusing (or with
--force-conflicts=false, a conflict), Paperclip unreadable. A summary line goes
to stderr.`

func newDiffCmd(g *globalOptions) *cobra.Command {
	var (
		flags gitopsFlags
		opts  = apply.DefaultDiffOptions()
	)
	cmd := &cobra.Command{
		Use:   "diff [DIR]",
		Short: "Show what apply would change in the cluster",
		Long:  diffLong,
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			in, err := flags.load(cmd.Context(), g, args)
			if err != nil {
				return diffError(err)
			}
			opts.Prune, opts.PruneMax, opts.PruneFloor, opts.AllowMassPrune =
				in.limits.Prune, in.limits.PruneMax, in.limits.PruneFloor, in.limits.AllowMassPrune
			run := flags.newSides(g)
			changed := false
			if flags.sides.kubernetes {
				run.fail(func() error {
					m, err := flags.set.manager(g)
					if err != nil {
						return err
					}
					d, err := m.Diff(cmd.Context(), in.out.Objects, opts)
					if err != nil {
						return err
					}
					if err := writeDiffTo(g, run.kubeOut(), flags.set.output, d); err != nil {
						return err
					}
					changed = d.Changed()
					if failed := d.Count(apply.ActionFailed); failed > 0 {
						return fmt.Errorf("%d of %d objects could not be diffed", failed, len(d.Objects))
					}
					return nil
				}())
			}
			if flags.sides.paperclip && paperclip.Wants(in.model) {
				ro := paperclipOptions(true, opts.PruneMax, opts.PruneFloor, opts.AllowMassPrune)
				rep, perr := paperclipReconciler(g).Reconcile(cmd.Context(), in.model, ro)
				run.rep = rep
				if errors.Is(perr, paperclip.ErrMassPause) {
					// What apply would refuse: shown (as refused), not a diff failure.
					fmt.Fprintln(g.Stderr, "warning: "+perr.Error())
					perr = nil
				}
				if !run.json() {
					perr = errors.Join(perr, rep.WriteDiff(g.Stdout, opts.Context))
				}
				perr = errors.Join(perr, rep.WriteErrors(g.Stderr))
				fmt.Fprintln(g.Stderr, "diff: "+rep.SummaryLine())
				if rep.Err() != nil && perr == nil {
					perr = fmt.Errorf("paperclip: %d companies could not be read", companyErrors(rep))
				}
				run.fail(perr)
				changed = changed || rep.Changed()
			}
			if err := run.end(); err != nil {
				return err
			}
			if changed {
				return &exitError{code: 1, err: errDifferences, reported: true}
			}
			return nil
		},
	}
	f := cmd.Flags()
	flags.add(f, "show members that apply --prune would delete, as deletions")
	addForceConflicts(f, &opts.ForceConflicts)
	f.IntVarP(&opts.Context, "unified", "U", 3, "lines of context around each change")
	return cmd
}

// diffError is err with diff's exit code: 1 means differences found, so an
// invalid config (exit code 1 elsewhere) is 2, as every other error is.
func diffError(err error) error {
	if exitCode(err) != 1 {
		return err
	}
	var ee *exitError
	reported := errors.As(err, &ee) && ee.reported
	return &exitError{code: 2, err: err, reported: reported}
}
