package main

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/pcsync/pcsync/pkg/apply"
	"github.com/pcsync/pcsync/pkg/paperclip"
)

func newDiffCmd(g *globalOptions) *cobra.Command {
	var (
		set   applySetFlags
		sides sideFlags
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

Companies with spec.paperclip.manage also show their Paperclip agents' changes:
a unified diff of the managed fields per agent ("live/paperclip/<company>/agents/
<agent>" against "declared/…"), reading only. --paperclip=false leaves that side
out; --kubernetes=false shows only it (no cluster needed).

Exit code: 0 no differences, 1 differences (or an invalid config), 2 or more when
the API server refuses (or with --force-conflicts=false, a conflict) or Paperclip
cannot be read. A summary line goes to stderr.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := set.validate(); err != nil {
				return err
			}
			if err := sides.validate(); err != nil {
				return err
			}
			lim, err := prune.limits()
			if err != nil {
				return err
			}
			opts.Prune, opts.PruneMax, opts.PruneFloor, opts.AllowMassPrune =
				lim.Prune, lim.PruneMax, lim.PruneFloor, lim.AllowMassPrune
			model, out, err := g.loadModelAndRender(cmd.Context(), dirArg(args), set.namespace)
			if err != nil {
				return err
			}
			var errs []error
			changed := false
			var kubeJSON bytes.Buffer
			if sides.kubernetes {
				kerr := func() error {
					m, err := set.manager(g)
					if err != nil {
						return err
					}
					d, err := m.Diff(cmd.Context(), out.Objects, opts)
					if err != nil {
						return err
					}
					w := g.Stdout
					if set.output == "json" {
						w = &kubeJSON
					}
					if err := writeDiffTo(g, w, set.output, d); err != nil {
						return err
					}
					changed = d.Changed()
					if failed := d.Count(apply.ActionFailed); failed > 0 {
						return fmt.Errorf("%d of %d objects could not be diffed", failed, len(d.Objects))
					}
					return nil
				}()
				if kerr != nil {
					errs = append(errs, kerr)
				}
			}
			var rep *paperclip.Report
			if sides.paperclip && paperclip.Wants(model) {
				ro := paperclipOptions(true, opts.PruneMax, opts.PruneFloor, opts.AllowMassPrune)
				var perr error
				rep, perr = paperclipReconciler(g).Reconcile(cmd.Context(), model, ro)
				if errors.Is(perr, paperclip.ErrMassPause) {
					// What apply would refuse: shown (as refused), not a diff failure.
					fmt.Fprintln(g.Stderr, "warning: "+perr.Error())
					perr = nil
				}
				if set.output != "json" {
					perr = errors.Join(perr, rep.WriteDiff(g.Stdout, opts.Context))
				}
				perr = errors.Join(perr, rep.WriteErrors(g.Stderr))
				fmt.Fprintln(g.Stderr, "diff: "+rep.SummaryLine())
				if rep.Err() != nil && perr == nil {
					perr = fmt.Errorf("paperclip: %d companies could not be read", companyErrors(rep))
				}
				if perr != nil {
					errs = append(errs, perr)
				}
				changed = changed || rep.Changed()
			}
			if set.output == "json" {
				if rep == nil {
					_, _ = g.Stdout.Write(kubeJSON.Bytes())
				} else if err := writeJSONWithPaperclip(g.Stdout, kubeJSON.Bytes(), rep); err != nil {
					errs = append(errs, err)
				}
			}
			if len(errs) > 0 {
				return &exitError{code: 2, err: errors.Join(errs...)}
			}
			if changed {
				return &exitError{code: 1, err: errDifferences, reported: true}
			}
			return nil
		},
	}
	f := cmd.Flags()
	set.add(f)
	sides.add(f)
	prune.add(f, "show members that apply --prune would delete, as deletions", true)
	addForceConflicts(f, &opts.ForceConflicts)
	f.IntVarP(&opts.Context, "unified", "U", 3, "lines of context around each change")
	return cmd
}
