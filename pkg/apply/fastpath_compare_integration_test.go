//go:build integration

package apply_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/pcsync/pcsync/pkg/apply"
	"github.com/pcsync/pcsync/pkg/config"
	"github.com/pcsync/pcsync/pkg/config/configtest"
	"github.com/pcsync/pcsync/pkg/render"
)

// compareCorpus renders the configs that the no-op check is compared on: every golden
// case of testdata/render, examples/config and a configtest fleet.
func (e *env) compareCorpus() []*unstructured.Unstructured {
	e.t.Helper()
	var dirs []string
	entries, err := os.ReadDir("../../testdata/render")
	if err != nil {
		e.t.Fatal(err)
	}
	for _, en := range entries {
		if en.IsDir() {
			dirs = append(dirs, filepath.Join("../../testdata/render", en.Name(), "config"))
		}
	}
	dirs = append(dirs, "../../examples/config")
	fleet := e.t.TempDir()
	if err := configtest.WriteFleet(fleet, configtest.FleetOptions{Companies: 10}); err != nil {
		e.t.Fatal(err)
	}
	dirs = append(dirs, fleet)
	var objs []*unstructured.Unstructured
	seen := map[string]string{} // namespace → the config that renders it
	for i, dir := range dirs {
		m, err := config.Load(context.Background(), dir, config.DefaultLoadOptions())
		if err != nil {
			e.t.Fatalf("%s: %v", dir, err)
		}
		// A case whose patches name its namespaces (patches-scoped) keeps them; the
		// others' slugs collide, so they get a prefix of their own.
		prefix := m.Settings.Spec.NamespacePrefix
		m.Settings.Spec.NamespacePrefix = fmt.Sprintf("q%s-%d-", e.id, i)
		out, err := render.Render(m, render.DefaultOptions())
		if err != nil {
			m.Settings.Spec.NamespacePrefix = prefix
			out, err = render.Render(m, render.DefaultOptions())
		}
		if err != nil {
			e.t.Fatalf("%s: %v", dir, err)
		}
		for _, c := range out.Companies {
			if other, ok := seen[c.Namespace]; ok {
				e.t.Fatalf("%s and %s both render namespace %s", other, dir, c.Namespace)
			}
			seen[c.Namespace] = dir
			e.cleanupNamespace(c.Namespace)
		}
		objs = append(objs, out.Objects...)
	}
	return objs
}

// comparedChange is what TestNoOpCheckMatchesServer compares of a Change.
type comparedChange struct {
	Ref       string
	Action    apply.Action
	Prune     bool
	Err, Note string
	Diff      string
}

func compared(r *apply.ChangeSet) []comparedChange {
	var out []comparedChange
	for _, c := range r.Objects {
		cc := comparedChange{Ref: c.Ref.String(), Action: c.Action, Prune: c.Prune, Note: c.Note, Diff: c.Diff}
		if c.Err != nil {
			cc.Err = c.Err.Error()
		}
		out = append(out, cc)
	}
	return out
}

// TestNoOpCheckMatchesServer is the equivalence test of fastpath_compare.go: Diff
// decides from the LIST that an object is already as desired (the fast path) or asks
// the server with a dry run for every object that exists (ManagerOptions.Reference),
// and must give the same actions, diffs and errors; and Apply, on either path, must do
// what Diff said. The corpus is every golden config of testdata/render,
// examples/config and a configtest fleet (the cilium cases fail alike: the cluster
// serves no CiliumNetworkPolicy), compared before anything is applied, once applied,
// after other managers changed it (an edited field, a removed label, a deleted object,
// a label and an annotation of their own), after the repository changed it, and once
// all is applied again.
// A dry-run Apply of the settled set must say unchanged on both paths (the reference
// path once called an object holding integers configured: the dry run's answer was
// decoded into float64, the LIST's items into int64).
func TestNoOpCheckMatchesServer(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	objs := e.compareCorpus()
	fast := e.manager(withCompanyOwner)
	ref := e.manager(withCompanyOwner, func(o *apply.ManagerOptions) { o.Reference = true })

	// check compares Diff on both paths and returns its changes.
	check := func(stage string, objs []*unstructured.Unstructured) []comparedChange {
		t.Helper()
		df, err := fast.Diff(ctx, objs, apply.DefaultDiffOptions())
		if err != nil {
			t.Fatalf("%s: diff: %v", stage, err)
		}
		dr, err := ref.Diff(ctx, objs, apply.DefaultDiffOptions())
		if err != nil {
			t.Fatalf("%s: reference diff: %v", stage, err)
		}
		if diff := cmp.Diff(compared(dr), compared(df)); diff != "" {
			t.Errorf("%s: Diff differs from the reference (-reference +fast):\n%s", stage, diff)
		}
		t.Logf("%s: %d objects, %d unchanged; dry runs sent: %d on the fast path, %d on the reference path",
			stage, len(objs), df.Count(apply.ActionUnchanged), df.MutatingRequests, dr.MutatingRequests)
		return compared(df)
	}
	// applyAs applies objs with m and requires the actions Diff gave.
	applyAs := func(stage string, m *apply.Manager, objs []*unstructured.Unstructured, diffed []comparedChange) {
		t.Helper()
		r, err := m.Apply(ctx, objs, apply.DefaultApplyOptions())
		if err != nil {
			t.Fatalf("%s: apply: %v", stage, err)
		}
		e.waitDeploymentsSettled(ctx, r)
		got := actionsOf(compared(r))
		for key, a := range got {
			// The API server rewrites a PersistentVolumeClaim on its second
			// server-side apply even when nothing in it changes (its resourceVersion
			// moves once, then stays): the reference path, which sends the apply,
			// reports it configured.
			if m == ref && a == apply.ActionConfigured && strings.HasPrefix(key, "PersistentVolumeClaim/") &&
				actionsOf(diffed)[key] == apply.ActionUnchanged {
				got[key] = apply.ActionUnchanged
			}
		}
		if diff := cmp.Diff(actionsOf(diffed), got); diff != "" {
			t.Errorf("%s: Apply did not do what Diff said (-diff +apply):\n%s", stage, diff)
		}
		for _, c := range r.Objects {
			if c.Action == apply.ActionFailed && c.Ref.Kind != "CiliumNetworkPolicy" {
				t.Errorf("%s: apply: %v", stage, c.Err)
			}
		}
	}

	created := check("nothing applied", objs)
	if n := countAction(created, apply.ActionCreated); n == 0 || countAction(created, apply.ActionFailed)+n != len(objs) {
		t.Fatalf("nothing applied: %d to create of %d objects; want all but the CiliumNetworkPolicies", n, len(objs))
	}
	applyAs("first apply, fast path", fast, objs, created)
	failed := countAction(created, apply.ActionFailed)
	if applied := check("as applied", objs); countAction(applied, apply.ActionUnchanged) != len(objs)-failed {
		t.Errorf("as applied: %d unchanged, want %d", countAction(applied, apply.ActionUnchanged), len(objs)-failed)
	}

	// Other managers: an edited quota value (a conflict, taken back), a removed label,
	// a deleted object, and a label and an annotation of their own (not pcsync's
	// fields: unchanged).
	var quota, sa, deny, role, lr *unstructured.Unstructured
	for _, o := range objs {
		switch {
		case quota == nil && o.GetKind() == "ResourceQuota":
			quota = o
		case sa == nil && o.GetKind() == "ServiceAccount":
			sa = o
		case deny == nil && o.GetKind() == "NetworkPolicy" && o.GetName() == render.DenyAllName:
			deny = o
		case role == nil && o.GetKind() == "Role":
			role = o
		case lr == nil && o.GetKind() == "LimitRange":
			lr = o
		}
	}
	if _, err := e.cs.CoreV1().ResourceQuotas(quota.GetNamespace()).Patch(ctx, quota.GetName(), types.MergePatchType,
		[]byte(`{"spec":{"hard":{"pods":"99"}}}`), metav1.PatchOptions{FieldManager: "kubectl-edit"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.cs.CoreV1().ServiceAccounts(sa.GetNamespace()).Patch(ctx, sa.GetName(), types.JSONPatchType,
		[]byte(`[{"op":"remove","path":"/metadata/labels/paperclip.io~1company"}]`),
		metav1.PatchOptions{FieldManager: "kubectl-label"}); err != nil {
		t.Fatal(err)
	}
	if err := e.cs.NetworkingV1().NetworkPolicies(deny.GetNamespace()).Delete(ctx, deny.GetName(),
		metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.cs.RbacV1().Roles(role.GetNamespace()).Patch(ctx, role.GetName(), types.MergePatchType,
		[]byte(`{"metadata":{"labels":{"team":"blue"},"annotations":{"example.com/note":"hello"}}}`),
		metav1.PatchOptions{FieldManager: "someone-else"}); err != nil {
		t.Fatal(err)
	}
	drifted := check("after other managers", objs)
	want := map[string]apply.Action{
		refString(quota): apply.ActionConfigured, refString(sa): apply.ActionConfigured,
		refString(deny): apply.ActionCreated, refString(role): apply.ActionUnchanged,
	}
	if diff := cmp.Diff(want, pick(actionsOf(drifted), want)); diff != "" {
		t.Errorf("after other managers (-want +got):\n%s", diff)
	}
	applyAs("after other managers, fast path", fast, objs, drifted)

	// The repository changes: a new label, a changed rule, a removed field.
	changed := make([]*unstructured.Unstructured, len(objs))
	copy(changed, objs)
	for i, o := range changed {
		switch o {
		case sa:
			c := o.DeepCopy()
			labels := c.GetLabels()
			labels["example.com/tier"] = "gold"
			c.SetLabels(labels)
			changed[i] = c
		case role:
			c := o.DeepCopy()
			_ = unstructured.SetNestedSlice(c.Object, []any{map[string]any{"apiGroups": []any{""},
				"resources": []any{"pods/log", "pods"}, "verbs": []any{"get"}}}, "rules")
			changed[i] = c
		case lr:
			c := o.DeepCopy()
			limits, _, _ := unstructured.NestedSlice(c.Object, "spec", "limits")
			if len(limits) > 0 {
				delete(limits[0].(map[string]any), "defaultRequest")
				_ = unstructured.SetNestedSlice(c.Object, limits, "spec", "limits")
			}
			changed[i] = c
		}
	}
	diffed := check("after the repository changed", changed)
	want = map[string]apply.Action{
		refString(sa): apply.ActionConfigured, refString(role): apply.ActionConfigured,
		refString(lr): apply.ActionConfigured, refString(quota): apply.ActionUnchanged,
	}
	if diff := cmp.Diff(want, pick(actionsOf(diffed), want)); diff != "" {
		t.Errorf("after the repository changed (-want +got):\n%s", diff)
	}
	applyAs("after the repository changed, reference path", ref, changed, diffed)
	if settled := check("applied again", changed); countAction(settled, apply.ActionUnchanged) != len(objs)-failed {
		t.Errorf("applied again: %d unchanged, want %d", countAction(settled, apply.ActionUnchanged), len(objs)-failed)
	}
	dry := apply.DefaultApplyOptions()
	dry.DryRun = true
	for _, m := range []*apply.Manager{fast, ref} {
		r, err := m.Apply(ctx, changed, dry)
		if err != nil {
			t.Fatalf("dry-run apply: %v", err)
		}
		if n := r.Count(apply.ActionUnchanged); n != len(objs)-failed {
			t.Errorf("dry-run apply of the settled set (reference path %v): %d unchanged, want %d: %v",
				m == ref, n, len(objs)-failed, actionsOf(compared(r)))
		}
	}
}

func refString(o *unstructured.Unstructured) string {
	return apply.RefOf(o).String()
}

func countAction(cs []comparedChange, a apply.Action) int {
	n := 0
	for _, c := range cs {
		if c.Action == a {
			n++
		}
	}
	return n
}

// actionsOf maps each object to its action.
func actionsOf(cs []comparedChange) map[string]apply.Action {
	out := map[string]apply.Action{}
	for _, c := range cs {
		out[c.Ref] = c.Action
	}
	return out
}

// pick returns the entries of m whose keys are in keys.
func pick(m, keys map[string]apply.Action) map[string]apply.Action {
	out := map[string]apply.Action{}
	for k := range keys {
		out[k] = m[k]
	}
	return out
}
