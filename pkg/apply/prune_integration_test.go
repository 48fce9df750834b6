//go:build integration

package apply_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/pcsync/pcsync/pkg/apply"
)

// TestPruneRemovedCompany: four companies, then three. The removed company's
// objects are pruned (namespaced first, its Namespace last); objects that are not
// members — in a kept namespace and in the removed one — survive, and a Namespace
// that still holds them is retained.
func TestPruneRemovedCompany(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	objs := e.companies(5)
	if r, err := e.manager().Apply(ctx, objs, apply.DefaultApplyOptions()); err != nil || r.Err() != nil {
		t.Fatalf("apply: %v %v", err, r.Err())
	}
	ns0, ns3, ns4 := e.companyNS(0), e.companyNS(3), e.companyNS(4)
	// Foreign objects: a Role like ours in a kept namespace, and a ConfigMap in the
	// namespace of company 3, which is removed below.
	foreignRole := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "foreign-role",
		Labels: map[string]string{"app.kubernetes.io/managed-by": "pcsync"}}}
	if _, err := e.cs.RbacV1().Roles(ns0).Create(ctx, foreignRole, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	foreignCM := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "foreign"}, Data: map[string]string{"a": "b"}}
	if _, err := e.cs.CoreV1().ConfigMaps(ns3).Create(ctx, foreignCM, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// Remove companies 3 and 4 with a floor of 1: 2 of 5 tenants is more than
	// 25% of 5 (1).
	kept := objs[:24]
	opts := apply.DefaultApplyOptions()
	opts.Prune, opts.PruneFloor = true, 1
	_, err := e.manager().Apply(ctx, kept, opts)
	var refused *apply.PruneRefusedError
	if !errors.Is(err, apply.ErrMassPrune) || !errors.As(err, &refused) {
		t.Fatalf("want ErrMassPrune, got %v", err)
	}
	wantMsg := "refusing to prune: it would remove 2 of the fleet's 5 tenants (" + ns3 + ", " + ns4 + "; 16 objects), " +
		"more than --prune-max 25% (at least --prune-floor 1) allows: 1; nothing was changed; to approve exactly this " +
		"prune: kubectl annotate secret " + e.parent.Name + " -n " + e.parent.Namespace + " pcsync.io/approve-prune=" +
		refused.Hold.Token + " --overwrite (then apply again), or pass --allow-mass-prune"
	if err.Error() != wantMsg {
		t.Errorf("message:\n got %s\nwant %s", err, wantMsg)
	}
	if _, err := e.cs.CoreV1().Namespaces().Get(ctx, ns4, metav1.GetOptions{}); err != nil {
		t.Fatalf("refused prune deleted something: %v", err)
	}

	// Remove company 4 only (8 of 40) plus dry run first: nothing changes.
	kept = objs[:32]
	opts.DryRun = true
	r, err := e.manager().Apply(ctx, kept, opts)
	if err != nil || r.Err() != nil {
		t.Fatalf("dry-run prune: %v %v", err, r.Err())
	}
	if got := r.Count(apply.ActionPruned); got != 8 {
		t.Errorf("dry run would prune %d, want 8", got)
	}
	if _, err := e.cs.CoreV1().Namespaces().Get(ctx, ns4, metav1.GetOptions{}); err != nil {
		t.Fatalf("dry run deleted something: %v", err)
	}

	opts.DryRun = false
	r, err = e.manager().Apply(ctx, kept, opts)
	if err != nil || r.Err() != nil {
		t.Fatalf("prune: %v %v", err, r.Err())
	}
	var pruned []string
	for _, o := range r.Objects[len(kept):] {
		pruned = append(pruned, string(o.Action)+" "+o.Ref.String())
	}
	wantPruned := []string{
		// Namespaced first (by namespace, kind, name), the Namespace last.
		"pruned LimitRange/" + ns4 + "/paperclip-limits",
		"pruned NetworkPolicy/" + ns4 + "/paperclip-deny-all",
		"pruned NetworkPolicy/" + ns4 + "/paperclip-egress-allow",
		"pruned ResourceQuota/" + ns4 + "/paperclip-quota",
		"pruned Role/" + ns4 + "/paperclip-tenant-role",
		"pruned RoleBinding/" + ns4 + "/paperclip-tenant-rb",
		"pruned ServiceAccount/" + ns4 + "/paperclip-tenant-sa",
		"pruned Namespace/" + ns4,
	}
	if diff := cmp.Diff(wantPruned, pruned); diff != "" {
		t.Errorf("pruned (-want +got):\n%s", diff)
	}
	if _, err := e.cs.RbacV1().Roles(ns0).Get(ctx, "foreign-role", metav1.GetOptions{}); err != nil {
		t.Errorf("foreign Role in a kept namespace: %v", err)
	}
	waitGone(t, func() error {
		_, err := e.cs.CoreV1().Namespaces().Get(ctx, ns4, metav1.GetOptions{})
		return err
	})

	// Now company 3 goes too (8 of 32 = 25%): its members are pruned, but its
	// Namespace holds the foreign ConfigMap and is retained.
	kept = objs[:24]
	r, err = e.manager().Apply(ctx, kept, opts)
	if err != nil || r.Err() != nil {
		t.Fatalf("prune: %v %v", err, r.Err())
	}
	last := r.Objects[len(r.Objects)-1]
	wantNote := "holds objects that are not in the set, which deleting it would delete too: configmap/foreign; " +
		"it is pruned once they are gone"
	if last.Ref.String() != "Namespace/"+ns3 || last.Action != apply.ActionRetained || last.Note != wantNote {
		t.Errorf("last result = %+v", last)
	}
	if got := r.Count(apply.ActionPruned); got != 7 {
		t.Errorf("pruned %d, want 7", got)
	}
	if _, err := e.cs.CoreV1().ConfigMaps(ns3).Get(ctx, "foreign", metav1.GetOptions{}); err != nil {
		t.Errorf("foreign ConfigMap: %v", err)
	}
	// Once the foreign object is gone, the next prune deletes the Namespace.
	if err := e.cs.CoreV1().ConfigMaps(ns3).Delete(ctx, "foreign", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	r, err = e.manager().Apply(ctx, kept, opts)
	if err != nil || r.Err() != nil {
		t.Fatalf("prune: %v %v", err, r.Err())
	}
	if diff := cmp.Diff(map[string]apply.Action{"Namespace/" + ns3: apply.ActionPruned},
		pruneActions(r)); diff != "" {
		t.Errorf("second prune (-want +got):\n%s", diff)
	}
	parent, _ := e.cs.CoreV1().Secrets(e.parent.Namespace).Get(ctx, e.parent.Name, metav1.GetOptions{})
	wantNS := e.companyNS(0) + "," + e.companyNS(1) + "," + e.companyNS(2)
	if got := parent.Annotations[apply.AnnotationAdditionalNamespaces]; got != wantNS {
		t.Errorf("parent namespaces after prune = %q, want %q", got, wantNS)
	}
}

// TestPruneRefusesEmptyRender: an empty render never prunes, unless asked to.
func TestPruneRefusesEmptyRender(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	objs := e.companies(1)
	if r, err := e.manager().Apply(ctx, objs, apply.DefaultApplyOptions()); err != nil || r.Err() != nil {
		t.Fatalf("apply: %v %v", err, r.Err())
	}
	opts := apply.DefaultApplyOptions()
	opts.Prune = true
	r, err := e.manager().Apply(ctx, nil, opts)
	if !errors.Is(err, apply.ErrEmptyRender) {
		t.Fatalf("want ErrEmptyRender, got %v", err)
	}
	if r.MutatingRequests != 0 {
		t.Errorf("refused prune sent %d mutating requests", r.MutatingRequests)
	}
	opts.AllowMassPrune = true
	r, err = e.manager().Apply(ctx, nil, opts)
	if err != nil || r.Err() != nil {
		t.Fatalf("allowed mass prune: %v %v", err, r.Err())
	}
	if got := r.Count(apply.ActionPruned); got != 8 {
		t.Errorf("pruned %d, want 8", got)
	}
}

// TestPruneLimitAsCount: --prune-max as a count of tenants.
func TestPruneLimitAsCount(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	objs := e.companies(4)
	if r, err := e.manager().Apply(ctx, objs, apply.DefaultApplyOptions()); err != nil || r.Err() != nil {
		t.Fatalf("apply: %v %v", err, r.Err())
	}
	opts := apply.DefaultApplyOptions()
	opts.Prune, opts.PruneFloor = true, 0
	opts.PruneMax = intstr.FromInt32(1)
	if _, err := e.manager().Apply(ctx, objs[:16], opts); !errors.Is(err, apply.ErrMassPrune) {
		t.Fatalf("want ErrMassPrune for 2 tenants with a limit of 1, got %v", err)
	}
	opts.PruneMax = intstr.FromInt32(2)
	if r, err := e.manager().Apply(ctx, objs[:16], opts); err != nil || r.Count(apply.ActionPruned) != 16 {
		t.Fatalf("limit 2: %v, %v", err, actions(r))
	}
}

// TestPruneNeverTouchesOtherSets: two ApplySets side by side; pruning one leaves the
// other's members alone even when they share a namespace and kinds.
func TestPruneNeverTouchesOtherSets(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	objs := e.companies(1)
	if r, err := e.manager().Apply(ctx, objs, apply.DefaultApplyOptions()); err != nil || r.Err() != nil {
		t.Fatalf("apply: %v %v", err, r.Err())
	}
	other := e.manager(func(o *apply.ManagerOptions) { o.ApplySet.Name = "other" })
	cm := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "other-cm", "namespace": e.companyNS(0)}, "data": map[string]any{"a": "b"}}}
	if r, err := other.Apply(ctx, []*unstructured.Unstructured{cm}, apply.DefaultApplyOptions()); err != nil || r.Err() != nil {
		t.Fatalf("other apply: %v %v", err, r.Err())
	}
	// Prune the Role from the first set.
	kept := slices.DeleteFunc(slices.Clone(objs), func(u *unstructured.Unstructured) bool { return u.GetKind() == "Role" })
	opts := apply.DefaultApplyOptions()
	opts.Prune = true
	r, err := e.manager().Apply(ctx, kept, opts)
	if err != nil || r.Err() != nil {
		t.Fatalf("prune: %v %v", err, r.Err())
	}
	if diff := cmp.Diff(map[string]apply.Action{"Role/" + e.companyNS(0) + "/paperclip-tenant-role": apply.ActionPruned},
		pruneActions(r)); diff != "" {
		t.Errorf("pruned (-want +got):\n%s", diff)
	}
	if _, err := e.cs.CoreV1().ConfigMaps(e.companyNS(0)).Get(ctx, "other-cm", metav1.GetOptions{}); err != nil {
		t.Errorf("the other set's ConfigMap: %v", err)
	}
	// And the other set refuses to take over a parent it does not own.
	hijack := e.manager(func(o *apply.ManagerOptions) { o.ToolingName = "someone-else" })
	_, err = hijack.Apply(ctx, objs, apply.DefaultApplyOptions())
	if err == nil || !strings.Contains(err.Error(), `is managed by tooling "pcsync", not "someone-else"`) {
		t.Errorf("foreign tooling: %v", err)
	}
}

// pruneActions maps the change set's prunes (Change.Prune) to their actions.
func pruneActions(r *apply.ChangeSet) map[string]apply.Action {
	out := map[string]apply.Action{}
	for _, o := range r.Objects {
		if o.Prune {
			out[o.Ref.String()] = o.Action
		}
	}
	return out
}

func waitGone(t *testing.T, get func() error) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if err := get(); apierrors.IsNotFound(err) {
			return
		}
		time.Sleep(250 * time.Millisecond)
	}
	t.Fatal("object not gone after 60s")
}
