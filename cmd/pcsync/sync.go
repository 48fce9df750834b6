package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"

	"github.com/spf13/pflag"

	"github.com/pcsync/pcsync/internal/lib/agentpod"
	"github.com/pcsync/pcsync/pkg/apply"
	"github.com/pcsync/pcsync/pkg/config"
	"github.com/pcsync/pcsync/pkg/paperclip"
	"github.com/pcsync/pcsync/pkg/render"
)

// gitopsFlags are the flags apply and diff share: the ApplySet, the sides
// and the prune guard. The daemon has them too, with its own help.
type gitopsFlags struct {
	set   applySetFlags
	sides sideFlags
	prune pruneFlags
}

// add adds the ApplySet, side and prune flags (--allow-mass-prune
// included); pruneUsage is the command's own help of --prune.
func (f *gitopsFlags) add(fs *pflag.FlagSet, pruneUsage string) {
	f.set.add(fs)
	f.sides.add(fs)
	f.prune.add(fs, pruneUsage, true)
}

// check validates the flags, before anything is read, and returns the
// prune guard's limits (Prune, PruneMax, PruneFloor, AllowMassPrune).
func (f *gitopsFlags) check() (apply.ApplyOptions, error) {
	if err := f.set.validate(); err != nil {
		return apply.ApplyOptions{}, err
	}
	if err := f.sides.validate(); err != nil {
		return apply.ApplyOptions{}, err
	}
	return f.prune.limits()
}

// gitopsInput is what apply and diff work on once their flags are checked.
type gitopsInput struct {
	limits apply.ApplyOptions
	model  *config.Model
	out    *render.Output
}

// load checks the flags, then loads and renders the config directory of
// args (default "."). An invalid config is reported on stderr and gives
// exit code 1 before any request is sent.
func (f *gitopsFlags) load(ctx context.Context, g *globalOptions, args []string) (gitopsInput, error) {
	lim, err := f.check()
	if err != nil {
		return gitopsInput{}, err
	}
	model, out, err := g.loadModelAndRender(ctx, dirArg(args), f.set.namespace)
	if err != nil {
		return gitopsInput{}, err
	}
	return gitopsInput{limits: lim, model: model, out: out}, nil
}

// sides collects what apply's or diff's two sides (Kubernetes, Paperclip)
// report: a failure of one does not stop the other, and with -o json both
// land in one document.
type sides struct {
	g        *globalOptions
	output   string
	kubeJSON bytes.Buffer
	// rep is the Paperclip side's report; nil when that side did not run.
	rep  *paperclip.Report
	errs []error
}

// newSides starts the sides of one apply or diff.
func (f *gitopsFlags) newSides(g *globalOptions) *sides {
	return &sides{g: g, output: f.set.output}
}

// json reports whether the output is one JSON document.
func (s *sides) json() bool { return s.output == "json" }

// kubeOut is where the Kubernetes side writes: stdout, or a buffer that end
// merges with the Paperclip report.
func (s *sides) kubeOut() io.Writer {
	if s.json() {
		return &s.kubeJSON
	}
	return s.g.Stdout
}

// fail records a side's error (nil is ignored).
func (s *sides) fail(err error) {
	if err != nil {
		s.errs = append(s.errs, err)
	}
}

// end writes the JSON document and returns exit code 2 with every side's
// error when any failed.
func (s *sides) end() error {
	if s.json() {
		if s.rep == nil {
			_, _ = s.g.Stdout.Write(s.kubeJSON.Bytes())
		} else if err := writeJSONWithPaperclip(s.g.Stdout, s.kubeJSON.Bytes(), s.rep); err != nil {
			s.errs = append(s.errs, err)
		}
	}
	if len(s.errs) > 0 {
		return &exitError{code: 2, err: errors.Join(s.errs...)}
	}
	return nil
}

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
	addOutputFlag(fs, &f.output, textFormats)
}

// validate checks the flags before anything is loaded.
func (f *applySetFlags) validate() error {
	if err := checkOutput(f.output, textFormats); err != nil {
		return err
	}
	if f.name == "" || f.namespace == "" {
		return usageErrorf("--applyset and --applyset-namespace must not be empty")
	}
	return nil
}

// takeOverSets are the IDs of the ApplySets that --take-over-applyset
// names (NAMESPACE/NAME of each parent Secret), for apply.Handover.From.
func takeOverSets(vals []string, own applySetFlags) ([]string, error) {
	var ids []string
	for _, v := range vals {
		ns, name, ok := strings.Cut(v, "/")
		if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
			return nil, usageErrorf("--take-over-applyset %q: want NAMESPACE/NAME of the other set's parent Secret", v)
		}
		if ns == own.namespace && name == own.name {
			return nil, usageErrorf("--take-over-applyset %q: that is this set (--applyset-namespace/--applyset)", v)
		}
		ids = append(ids, apply.ParentID(name, ns))
	}
	return ids, nil
}

// manager builds the apply.Manager for the flags and the cluster of g.
func (f *applySetFlags) manager(g *globalOptions) (*apply.Manager, error) {
	cfg, err := g.restConfig()
	if err != nil {
		return nil, err
	}
	opts := g.managerOptions()
	opts.ApplySet = apply.ParentRef{Name: f.name, Namespace: f.namespace}
	opts.ToolVersion = toolVersion()
	opts.Workers = f.workers
	opts.Logger = g.Logger
	opts.OwnerLabel = agentpod.LabelCompany // a company adopts with pcsync.io/adopt=<its slug>
	return apply.NewManager(cfg, opts)
}

// toolVersion is the version for the ApplySet tooling annotation ("pcsync/<semver>").
func toolVersion() string {
	if strings.HasPrefix(version, "v") {
		return version
	}
	return "v0.0.0-" + version
}
