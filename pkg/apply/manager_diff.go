package apply

import (
	"context"
	"errors"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/yaml"

	"github.com/pcsync/pcsync/internal/lib/textdiff"
)

// Diff shows what Apply would change, as kubectl diff does: for every object whose live
// state the no-op check cannot confirm, a server-side dry-run apply, then a unified
// diff between the live object and the result, with managedFields, resourceVersion,
// generation, uid, creationTimestamp and status left out and Secret data masked
// ("***", or "*** (before)" / "*** (after)" for a changed value), in each Change's Diff.
// With Prune, members that apply --prune would delete are shown as deletions (their
// Changes have Prune set) and the prune guard judges them (ChangeSet.PruneHeld).
// Nothing is written: the change set is a dry run.
func (m *Manager) Diff(ctx context.Context, objs []*unstructured.Unstructured, opts DiffOptions) (*ChangeSet, error) {
	c := m.newCall(true)
	defer c.done()
	report := c.report
	opts.complete()
	if err := c.load(ctx, objs); err != nil {
		return report, err
	}
	desired, inv, idx := c.desired, c.inv, c.idx
	var plan *prunePlan
	if opts.Prune {
		ao := ApplyOptions{PruneMax: opts.PruneMax, PruneFloor: opts.PruneFloor, AllowMassPrune: opts.AllowMassPrune}
		var err error
		if plan, report.PruneHeld, err = c.planPrune(ctx, len(objs) == 0, ao, inv.approval); err != nil {
			return report, err
		}
	}

	creatingNS := sets.New[string]()
	for _, d := range desired {
		if d.ref.GroupKind() == namespaceGroupKind && d.mapping != nil && idx.get(d.mapping, d.ref) == nil {
			creatingNS.Insert(d.ref.Name)
		}
	}
	results := make([]Change, len(objs))
	forEach(ctx, m.opts.Workers, len(desired), func(ctx context.Context, i int) {
		d := desired[i]
		r := m.diffOne(ctx, d, idx, opts, creatingNS)
		if r.Err != nil {
			r.Err = objectError(d.ref, "diff", redact(r.Err, d.obj))
		}
		results[d.index] = r
	})
	if err := ctx.Err(); err != nil {
		return report, err
	}
	report.Objects = results
	if plan != nil {
		for _, p := range plan.objects {
			if p.release {
				report.Objects = append(report.Objects, m.diffRelease(ctx, p, opts))
				continue
			}
			from, _, err := maskedTexts(p.obj, nil)
			r := Change{Ref: p.ref, Action: ActionPruned, Prune: true, Diff: textdiff.Unified(diffHeader("live", p.ref),
				diffHeader("merged", p.ref), from, "", opts.Context)}
			if err != nil {
				r = Change{Ref: p.ref, Action: ActionFailed, Prune: true, Err: objectError(p.ref, "diff", err)}
			}
			report.Objects = append(report.Objects, r)
		}
	}
	return report, nil
}

// diffRelease shows what releasing an adopted member would change: a dry run
// of the release, diffed against the live object.
func (m *Manager) diffRelease(ctx context.Context, p pruneObject, opts DiffOptions) Change {
	out, err := m.releaseRequest(ctx, p, true)
	var from, to string
	if err == nil {
		from, to, err = maskedTexts(p.obj, out)
	}
	if err != nil {
		return Change{Ref: p.ref, Action: ActionFailed, Prune: true, Err: objectError(p.ref, "diff", err)}
	}
	return Change{Ref: p.ref, Action: ActionReleased, Prune: true,
		Diff: textdiff.Unified(diffHeader("live", p.ref), diffHeader("merged", p.ref), from, to, opts.Context)}
}

// diffOne computes the diff of one object.
func (m *Manager) diffOne(ctx context.Context, d *desiredObject, idx *liveIndex, opts DiffOptions, creatingNS sets.Set[string]) Change {
	res := Change{Ref: d.ref}
	if d.err != nil {
		res.Action, res.Err = ActionFailed, errors.Unwrap(d.err)
		return res
	}
	var live, merged *unstructured.Unstructured
	switch {
	case d.pending:
		merged = d.obj // its CRD does not exist yet: the server cannot dry-run it
	default:
		live = idx.get(d.mapping, d.ref)
		if live == nil {
			// Not a member (yet): it may still exist, created by someone else.
			var err error
			r := m.dyn.Resource(d.mapping.Resource)
			if d.ref.Namespace == "" {
				live, err = r.Get(ctx, d.ref.Name, getOptions())
			} else {
				live, err = r.Namespace(d.ref.Namespace).Get(ctx, d.ref.Name, getOptions())
			}
			if apierrors.IsNotFound(err) {
				live, err = nil, nil
			}
			if err != nil {
				res.Action, res.Err = ActionFailed, fmt.Errorf("reading the live object: %w", err)
				return res
			}
		} else if ok, _ := m.upToDate(d.obj, live); ok {
			res.Action = ActionUnchanged
			return res
		}
		var err error
		merged, _, err = m.patchApply(ctx, d.mapping, d.ref.Namespace, d.ref.Name, d.body, m.opts.FieldManager,
			opts.ForceConflicts, true)
		if err != nil {
			if apierrors.IsNotFound(err) && creatingNS.Has(d.ref.Namespace) {
				merged = d.obj // its namespace is created by this apply
			} else {
				res.Action, res.Err = ActionFailed, explainApplyError(err)
				return res
			}
		}
	}
	from, to, err := maskedTexts(live, merged)
	if err != nil {
		res.Action, res.Err = ActionFailed, err
		return res
	}
	res.Diff = textdiff.Unified(diffHeader("live", d.ref), diffHeader("merged", d.ref), from, to, opts.Context)
	switch {
	case live == nil:
		res.Action = ActionCreated
	case res.Diff == "":
		res.Action = ActionUnchanged
	default:
		res.Action = ActionConfigured
	}
	return res
}

// diffHeader names one side of a diff like kubectl diff's files:
// <side>/<group>.<version>.<Kind>.<namespace>.<name>.
func diffHeader(side string, ref ObjectRef) string {
	parts := []string{}
	if ref.Group != "" {
		parts = append(parts, ref.Group)
	}
	parts = append(parts, ref.Version, ref.Kind)
	if ref.Namespace != "" {
		parts = append(parts, ref.Namespace)
	}
	parts = append(parts, ref.Name)
	return side + "/" + strings.Join(parts, ".")
}

// maskedTexts renders the two sides of a diff as YAML, without server-owned fields and
// with Secret data masked.
func maskedTexts(live, merged *unstructured.Unstructured) (string, string, error) {
	a, b := stripForDiff(live), stripForDiff(merged)
	if isSecret(a) || isSecret(b) {
		maskSecretData(a, b)
	}
	from, err := toYAML(a)
	if err != nil {
		return "", "", err
	}
	to, err := toYAML(b)
	return from, to, err
}

func toYAML(u *unstructured.Unstructured) (string, error) {
	if u == nil {
		return "", nil
	}
	b, err := yaml.Marshal(u.Object)
	if err != nil {
		return "", fmt.Errorf("encoding YAML: %w", err)
	}
	return string(b), nil
}

// stripForDiff returns a copy of u without the fields that change on every write or
// belong to the server, and without the applied-hash annotation.
func stripForDiff(u *unstructured.Unstructured) *unstructured.Unstructured {
	if u == nil {
		return nil
	}
	c := u.DeepCopy()
	delete(c.Object, "status")
	for _, f := range []string{"managedFields", "resourceVersion", "generation", "uid", "creationTimestamp", "selfLink"} {
		unstructured.RemoveNestedField(c.Object, "metadata", f)
	}
	// pcsync's bookkeeping digest changes with every configuration change and tells a
	// reader nothing the rest of the diff does not.
	unstructured.RemoveNestedField(c.Object, "metadata", "annotations", AnnotationAppliedHash)
	if len(c.GetAnnotations()) == 0 {
		unstructured.RemoveNestedField(c.Object, "metadata", "annotations")
	}
	return c
}

func isSecret(u *unstructured.Unstructured) bool {
	return u != nil && u.GetKind() == "Secret" && u.GetAPIVersion() == "v1"
}

// Masks for Secret values, as kubectl diff writes them.
const (
	maskSame   = "***"
	maskBefore = "*** (before)"
	maskAfter  = "*** (after)"
)

// maskSecretData replaces the values of data and stringData in both versions of a
// Secret: equal values become "***" on both sides, changed values "*** (before)" and
// "*** (after)", values on one side only "***". Keys stay visible.
func maskSecretData(from, to *unstructured.Unstructured) {
	for _, field := range []string{"data", "stringData"} {
		var f, t map[string]any
		if from != nil {
			f, _, _ = unstructured.NestedMap(from.Object, field)
		}
		if to != nil {
			t, _, _ = unstructured.NestedMap(to.Object, field)
		}
		for k, fv := range f {
			if tv, ok := t[k]; ok {
				if fv != tv {
					f[k], t[k] = maskBefore, maskAfter
					continue
				}
				t[k] = maskSame
			}
			f[k] = maskSame
		}
		for k := range t {
			if _, ok := f[k]; !ok {
				t[k] = maskSame
			}
		}
		if f != nil {
			_ = unstructured.SetNestedMap(from.Object, f, field)
		}
		if t != nil {
			_ = unstructured.SetNestedMap(to.Object, t, field)
		}
	}
}
