package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/pcsync/pcsync/pkg/apply"
	"github.com/pcsync/pcsync/pkg/paperclip"
)

// applyLong is the help of pcsync apply.
const applyLong = `apply validates and renders DIR (default ".") and server-side applies the result with
field manager "pcsync": CRDs first (waiting until they are Established), then
Namespaces and other cluster-scoped objects, then namespaced objects (each once its
Namespace is there), in parallel. Objects that are already as desired are not sent: a sync with nothing to
do makes no change to the cluster. The config repository owns the fields it
declares: fields another field manager changed (kubectl edit, kubectl patch) are
taken back, as the daemon and Flux do (--force-conflicts=false reports them as
conflicts instead). Every object is recorded in a kubectl-compatible ApplySet (a
Secret, --applyset in --applyset-namespace, default pcsync in pcsync-system), so
that --prune deletes only what pcsync applied and no longer renders;
--take-over-applyset moves another set's members into this one.

The prune guard stops accidents, not edits: an empty render, the removal of every
tenant (company) or of more tenants than --prune-max of the fleet (at least
--prune-floor) is refused before anything changes, with the command that approves
exactly that prune; removing a company or a few always goes through.

Companies with spec.paperclip.manage also get their agents in Paperclip as
declared (created with the pcsync adapter, hand edits put back, agents removed
from the config paused, behind the --prune-max guard); --paperclip=false leaves
that side out, --kubernetes=false does only that side (no cluster needed). A
failure of one side does not stop the other.

An invalid config changes nothing (exit code 1). Output: one line per object,
"<kind>[.<group>]/<name> <action>[ (<namespace>)]" with action created, configured,
unchanged, recreated, pruned, retained or failed, then a summary line; -o json
for machines. Exit code 2 if any object failed.`

func newApplyCmd(g *globalOptions) *cobra.Command {
	var (
		flags    gitopsFlags
		opts     = apply.DefaultApplyOptions()
		takeOver []string
	)
	cmd := &cobra.Command{
		Use:   "apply [DIR]",
		Short: "Server-side apply the tenant manifests of a config directory",
		Long:  applyLong,
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			from, err := takeOverSets(takeOver, flags.set)
			if err != nil {
				return err
			}
			opts.Handover.From = from
			in, err := flags.load(cmd.Context(), g, args)
			if err != nil {
				return err
			}
			opts.Prune, opts.PruneMax, opts.PruneFloor, opts.AllowMassPrune =
				in.limits.Prune, in.limits.PruneMax, in.limits.PruneFloor, in.limits.AllowMassPrune
			run := flags.newSides(g)
			if flags.sides.kubernetes {
				run.fail(func() error {
					m, err := flags.set.manager(g)
					if err != nil {
						return err
					}
					report, err := m.Apply(cmd.Context(), in.out.Objects, opts)
					if err == nil || len(report.Objects) > 0 {
						if werr := writeReportTo(g, run.kubeOut(), flags.set.output, report); werr != nil && err == nil {
							err = werr
						}
					}
					if err != nil {
						return err
					}
					if failed := report.Count(apply.ActionFailed); failed > 0 {
						return fmt.Errorf("%d of %d objects failed", failed, len(report.Objects))
					}
					return nil
				}())
			}
			if flags.sides.paperclip && paperclip.Wants(in.model) {
				ro := paperclipOptions(opts.DryRun, opts.PruneMax, opts.PruneFloor, opts.AllowMassPrune)
				rep, perr := paperclipReconciler(g).Reconcile(cmd.Context(), in.model, ro)
				run.rep = rep
				if !run.json() {
					perr = errors.Join(perr, rep.WriteText(g.Stdout))
				}
				perr = errors.Join(perr, rep.WriteErrors(g.Stderr))
				if rep.Err() != nil && perr == nil {
					perr = fmt.Errorf("paperclip: %d agents or companies failed", rep.Count("failed")+companyErrors(rep))
				}
				run.fail(perr)
			}
			return run.end()
		},
	}
	f := cmd.Flags()
	flags.add(f, "delete members of the ApplySet that are no longer rendered")
	addForceConflicts(f, &opts.ForceConflicts)
	f.BoolVar(&opts.Force, "force", false, "delete and recreate objects whose change touches an immutable field")
	f.BoolVar(&opts.DryRun, "dry-run", false,
		"persist nothing: print what would be applied and pruned (server-side dry run)")
	f.BoolVar(&opts.Wait, "wait", false, "wait until applied objects are ready (kstatus) and pruned ones are gone")
	f.DurationVar(&opts.Timeout, "timeout", 2*time.Minute,
		"how long to wait for readiness, CRDs to be Established and --force deletions")
	f.StringArrayVar(&takeOver, "take-over-applyset", nil,
		"NAMESPACE/NAME of another ApplySet's parent Secret whose members this set takes as its own, to move an inventory "+
			"(e.g. paperclip/pcsync, the default before pcsync-system); repeatable")
	return cmd
}

// companyErrors counts the companies whose agents could not be read.
func companyErrors(r *paperclip.Report) int {
	n := 0
	for _, c := range r.Companies {
		if c.Err != nil {
			n++
		}
	}
	return n
}
