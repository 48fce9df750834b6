package main

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/pcsync/pcsync/pkg/apply"
	"github.com/pcsync/pcsync/pkg/paperclip"
	"github.com/pcsync/pcsync/pkg/render"
)

// applySetFlags name the ApplySet inventory, shared by apply and diff.
type applySetFlags struct {
	name, namespace string
	workers         int
	output          string
}

func (f *applySetFlags) add(fs *pflag.FlagSet) {
	d := apply.DefaultManagerOptions()
	fs.StringVar(&f.name, "applyset", d.ApplySet.Name, "name of the Secret that is the ApplySet parent (inventory)")
	fs.StringVar(&f.namespace, "applyset-namespace", d.ApplySet.Namespace,
		"namespace of the ApplySet parent; created if missing")
	fs.IntVar(&f.workers, "workers", d.Workers, "requests sent in parallel")
	fs.StringVarP(&f.output, "output", "o", "text", "output format: text or json")
}

// validate checks the flags before anything is loaded.
func (f *applySetFlags) validate() error {
	if f.output != "text" && f.output != "json" {
		return usageErrorf("--output %q: want text or json", f.output)
	}
	if f.name == "" || f.namespace == "" {
		return usageErrorf("--applyset and --applyset-namespace must not be empty")
	}
	return nil
}

// manager builds the apply.Manager for the flags and the cluster of g.
func (f *applySetFlags) manager(g *globalOptions) (*apply.Manager, error) {
	cfg, err := g.Kube.RESTConfig()
	if err != nil {
		return nil, err
	}
	opts := apply.DefaultManagerOptions()
	opts.ApplySet = apply.ParentRef{Name: f.name, Namespace: f.namespace}
	opts.ToolVersion = toolVersion()
	opts.Workers = f.workers
	opts.Logger = g.Logger
	opts.OwnerLabel = render.LabelCompany // a company adopts with pcsync.io/adopt=<its slug>
	return apply.NewManager(cfg, opts)
}

// toolVersion is the version for the ApplySet tooling annotation ("pcsync/<semver>").
func toolVersion() string {
	if strings.HasPrefix(version, "v") {
		return version
	}
	return "v0.0.0-" + version
}

func newApplyCmd(g *globalOptions) *cobra.Command {
	var (
		set   applySetFlags
		sides sideFlags
		opts  = apply.DefaultApplyOptions()
		prune pruneFlags
	)
	cmd := &cobra.Command{
		Use:   "apply [DIR]",
		Short: "Server-side apply the tenant manifests of a config directory",
		Long: `apply validates and renders DIR (default ".") and server-side applies the result with
field manager "pcsync": CRDs first (waiting until they are Established), then
Namespaces and other cluster-scoped objects, then namespaced objects (each once its
Namespace is there), in parallel. Objects that are already as desired are not sent: a sync with nothing to
do makes no change to the cluster. The config repository owns the fields it
declares: fields another field manager changed (kubectl edit, kubectl patch) are
taken back, as the daemon and Flux do (--force-conflicts=false reports them as
conflicts instead). Every object is recorded in a kubectl-compatible ApplySet (a
Secret, --applyset in --applyset-namespace), so that --prune deletes only what
pcsync applied and no longer renders.

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
for machines. Exit code 2 if any object failed.`,
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
			var kubeJSON bytes.Buffer
			if sides.kubernetes {
				kerr := func() error {
					m, err := set.manager(g)
					if err != nil {
						return err
					}
					report, err := m.Apply(cmd.Context(), out.Objects, opts)
					if err == nil || len(report.Objects) > 0 {
						w := g.Stdout
						if set.output == "json" {
							w = &kubeJSON
						}
						if werr := writeReportTo(g, w, set.output, report); werr != nil && err == nil {
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
				}()
				if kerr != nil {
					errs = append(errs, kerr)
				}
			}
			var rep *paperclip.Report
			if sides.paperclip && paperclip.Wants(model) {
				ro := paperclipOptions(opts.DryRun, opts.PruneMax, opts.PruneFloor, opts.AllowMassPrune)
				var perr error
				rep, perr = paperclipReconciler(g).Reconcile(cmd.Context(), model, ro)
				if set.output != "json" {
					perr = errors.Join(perr, rep.WriteText(g.Stdout))
				}
				perr = errors.Join(perr, rep.WriteErrors(g.Stderr))
				if rep.Err() != nil && perr == nil {
					perr = fmt.Errorf("paperclip: %d agents or companies failed", rep.Count("failed")+companyErrors(rep))
				}
				if perr != nil {
					errs = append(errs, perr)
				}
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
			return nil
		},
	}
	f := cmd.Flags()
	set.add(f)
	sides.add(f)
	addForceConflicts(f, &opts.ForceConflicts)
	f.BoolVar(&opts.Force, "force", false, "delete and recreate objects whose change touches an immutable field")
	f.BoolVar(&opts.DryRun, "dry-run", false,
		"persist nothing: print what would be applied and pruned (server-side dry run)")
	prune.add(f, "delete members of the ApplySet that are no longer rendered", true)
	f.BoolVar(&opts.Wait, "wait", false, "wait until applied objects are ready (kstatus) and pruned ones are gone")
	f.DurationVar(&opts.Timeout, "timeout", 2*time.Minute,
		"how long to wait for readiness, CRDs to be Established and --force deletions")
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
