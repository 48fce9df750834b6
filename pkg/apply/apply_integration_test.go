//go:build integration

package apply_test

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/pcsync/pcsync/pkg/apply"
)

// TestApplyCreateNoopDrift: create, a no-op sync that sends no mutating request (by
// the client's own count and by the API server's audit log), then drift by other
// clients corrected.
func TestApplyCreateNoopDrift(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	m := e.manager()
	objs := e.companies(3)

	r, err := m.Apply(ctx, objs, apply.DefaultApplyOptions())
	if err != nil || r.Err() != nil {
		t.Fatalf("first apply: %v %v", err, r.Err())
	}
	if diff := cmp.Diff(allActions(objs, apply.ActionCreated), actions(r)); diff != "" {
		t.Errorf("first apply actions (-want +got):\n%s", diff)
	}
	// The parent was created with the ApplySet metadata.
	parent, err := e.cs.CoreV1().Secrets(e.parent.Namespace).Get(ctx, e.parent.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wantAnn := map[string]string{
		apply.AnnotationTooling: "pcsync/v0.0.0-test",
		apply.AnnotationContainsGroupKinds: "LimitRange,Namespace,NetworkPolicy.networking.k8s.io,ResourceQuota," +
			"Role.rbac.authorization.k8s.io,RoleBinding.rbac.authorization.k8s.io,ServiceAccount",
		apply.AnnotationAdditionalNamespaces: e.companyNS(0) + "," + e.companyNS(1) + "," + e.companyNS(2),
	}
	if diff := cmp.Diff(wantAnn, parent.Annotations); diff != "" {
		t.Errorf("parent annotations (-want +got):\n%s", diff)
	}
	if parent.Labels[apply.LabelApplySetID] != m.ApplySetID() {
		t.Errorf("parent id label = %q, want %q", parent.Labels[apply.LabelApplySetID], m.ApplySetID())
	}
	role, err := e.cs.RbacV1().Roles(e.companyNS(1)).Get(ctx, "paperclip-tenant-role", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if role.Labels[apply.LabelPartOf] != m.ApplySetID() {
		t.Errorf("member part-of label = %q", role.Labels[apply.LabelPartOf])
	}

	// No-op: a new Manager (as a new `pcsync apply` process would be).
	before := e.mutatingAudit()
	r, err = e.manager().Apply(ctx, objs, apply.DefaultApplyOptions())
	if err != nil || r.Err() != nil {
		t.Fatalf("no-op apply: %v %v", err, r.Err())
	}
	if diff := cmp.Diff(allActions(objs, apply.ActionUnchanged), actions(r)); diff != "" {
		t.Errorf("no-op actions (-want +got):\n%s", diff)
	}
	if r.MutatingRequests != 0 {
		t.Errorf("no-op sent %d mutating requests", r.MutatingRequests)
	}
	if diff := cmp.Diff(before, e.mutatingAudit()); diff != "" {
		t.Errorf("audit log shows mutating requests during the no-op (-before +after):\n%s", diff)
	}

	// Drift by others: an object deleted, a label removed by an update, a value
	// changed by "kubectl edit" (which takes ownership of it).
	ns0, ns1, ns2 := e.companyNS(0), e.companyNS(1), e.companyNS(2)
	if err := e.cs.NetworkingV1().NetworkPolicies(ns0).Delete(ctx, "paperclip-deny-all", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	patch := `[{"op":"remove","path":"/metadata/labels/paperclip.io~1company"}]`
	if _, err := e.cs.CoreV1().ServiceAccounts(ns1).Patch(ctx, "paperclip-tenant-sa", types.JSONPatchType,
		[]byte(patch), metav1.PatchOptions{FieldManager: "kubectl-label"}); err != nil {
		t.Fatal(err)
	}
	edit := `{"spec":{"hard":{"pods":"99"}}}`
	if _, err := e.cs.CoreV1().ResourceQuotas(ns2).Patch(ctx, "paperclip-quota", types.MergePatchType,
		[]byte(edit), metav1.PatchOptions{FieldManager: "kubectl-edit"}); err != nil {
		t.Fatal(err)
	}

	strict := apply.DefaultApplyOptions()
	strict.ForceConflicts = false
	r, err = e.manager().Apply(ctx, objs, strict)
	if err != nil {
		t.Fatal(err)
	}
	want := allActions(objs, apply.ActionUnchanged)
	want["NetworkPolicy/"+ns0+"/paperclip-deny-all"] = apply.ActionCreated
	want["ServiceAccount/"+ns1+"/paperclip-tenant-sa"] = apply.ActionConfigured
	want["ResourceQuota/"+ns2+"/paperclip-quota"] = apply.ActionFailed
	if diff := cmp.Diff(want, actions(r)); diff != "" {
		t.Errorf("drift actions (-want +got):\n%s", diff)
	}
	// With --force-conflicts=false the edited field is a conflict with the editor,
	// reported per object.
	wantErr := `ResourceQuota/` + ns2 + `/paperclip-quota apply failed: conflict with field manager "kubectl-edit" on ` +
		`.spec.hard.pods; apply without --force-conflicts=false to take the fields back`
	var ce *apply.ConflictError
	if err := r.Err(); err == nil || err.Error() != wantErr || !errors.As(err, &ce) {
		t.Errorf("conflict error:\n got %v\nwant %s", err, wantErr)
	}

	// By default the field is taken back.
	r, err = e.manager().Apply(ctx, objs, apply.DefaultApplyOptions())
	if err != nil || r.Err() != nil {
		t.Fatalf("forced apply: %v %v", err, r.Err())
	}
	if got := actions(r)["ResourceQuota/"+ns2+"/paperclip-quota"]; got != apply.ActionConfigured {
		t.Errorf("forced quota action = %s", got)
	}
	q, err := e.cs.CoreV1().ResourceQuotas(ns2).Get(ctx, "paperclip-quota", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := q.Spec.Hard.Pods().String(); got != "20" {
		t.Errorf("quota pods = %s after forced apply, want 20", got)
	}
	sa, _ := e.cs.CoreV1().ServiceAccounts(ns1).Get(ctx, "paperclip-tenant-sa", metav1.GetOptions{})
	if sa.Labels["paperclip.io/company"] != "company-1" {
		t.Errorf("removed label not restored: %v", sa.Labels)
	}

	// And quiet again.
	r, err = e.manager().Apply(ctx, objs, apply.DefaultApplyOptions())
	if err != nil || r.Err() != nil || r.MutatingRequests != 0 || r.Count(apply.ActionUnchanged) != len(objs) {
		t.Errorf("final no-op: err %v %v, %d mutating, %d unchanged", err, r.Err(), r.MutatingRequests,
			r.Count(apply.ActionUnchanged))
	}
}

// TestApplyChangedConfig: a changed configuration, including a removed field inside
// an atomic structure and a removed label, is applied; the rest stays untouched.
func TestApplyChangedConfig(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	objs := e.companies(1)
	if r, err := e.manager().Apply(ctx, objs, apply.DefaultApplyOptions()); err != nil || r.Err() != nil {
		t.Fatalf("apply: %v %v", err, r.Err())
	}
	ns := e.companyNS(0)
	changed := make([]*unstructured.Unstructured, len(objs))
	for i, o := range objs {
		changed[i] = o.DeepCopy()
		switch o.GetKind() {
		case "NetworkPolicy":
			if o.GetName() == "paperclip-egress-allow" {
				rules, _, _ := unstructured.NestedSlice(changed[i].Object, "spec", "egress")
				_ = unstructured.SetNestedSlice(changed[i].Object, rules[:2], "spec", "egress")
			}
		case "ServiceAccount":
			labels := changed[i].GetLabels()
			delete(labels, "paperclip.io/company")
			changed[i].SetLabels(labels)
		case "ResourceQuota":
			_ = unstructured.SetNestedField(changed[i].Object, "2000m", "spec", "hard", "requests.cpu")
		}
	}
	r, err := e.manager().Apply(ctx, changed, apply.DefaultApplyOptions())
	if err != nil || r.Err() != nil {
		t.Fatalf("apply: %v %v", err, r.Err())
	}
	want := allActions(objs, apply.ActionUnchanged)
	want["NetworkPolicy/"+ns+"/paperclip-egress-allow"] = apply.ActionConfigured
	want["ServiceAccount/"+ns+"/paperclip-tenant-sa"] = apply.ActionConfigured
	want["ResourceQuota/"+ns+"/paperclip-quota"] = apply.ActionConfigured
	if diff := cmp.Diff(want, actions(r)); diff != "" {
		t.Errorf("actions (-want +got):\n%s", diff)
	}
	np, _ := e.cs.NetworkingV1().NetworkPolicies(ns).Get(ctx, "paperclip-egress-allow", metav1.GetOptions{})
	if len(np.Spec.Egress) != 2 {
		t.Errorf("egress rules = %d, want 2", len(np.Spec.Egress))
	}
	sa, _ := e.cs.CoreV1().ServiceAccounts(ns).Get(ctx, "paperclip-tenant-sa", metav1.GetOptions{})
	if _, ok := sa.Labels["paperclip.io/company"]; ok {
		t.Errorf("removed label still there: %v", sa.Labels)
	}
	// "2000m" is stored as "2": the next sync is a no-op all the same.
	r, err = e.manager().Apply(ctx, changed, apply.DefaultApplyOptions())
	if err != nil || r.Err() != nil || r.MutatingRequests != 0 {
		t.Errorf("no-op after change: %v %v, %d mutating; actions %v", err, r.Err(), r.MutatingRequests, actions(r))
	}
}

// TestApplyMissingKind: a CiliumNetworkPolicy on a cluster without Cilium fails with
// what to do, and every other object of every tenant is applied.
func TestApplyMissingKind(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	objs := e.companies(2)
	cnp := ciliumPolicy(e.companyNS(0))
	all := append(slices.Clone(objs), cnp)
	r, err := e.manager().Apply(ctx, all, apply.DefaultApplyOptions())
	if err != nil {
		t.Fatal(err)
	}
	want := allActions(objs, apply.ActionCreated)
	want["CiliumNetworkPolicy/"+e.companyNS(0)+"/paperclip-egress-fqdn"] = apply.ActionFailed
	if diff := cmp.Diff(want, actions(r)); diff != "" {
		t.Errorf("actions (-want +got):\n%s", diff)
	}
	wantErr := "CiliumNetworkPolicy/" + e.companyNS(0) + "/paperclip-egress-fqdn apply failed: the cluster does not " +
		"serve kind CiliumNetworkPolicy in cilium.io/v2: install Cilium (it serves cilium.io/v2 CiliumNetworkPolicy), " +
		`or set Settings spec.egress.mode (or the company's egress.mode) to "proxy", the default, ` +
		"whose egress proxy enforces host names on any network plugin"
	if err := r.Err(); err == nil || err.Error() != wantErr {
		t.Errorf("error:\n got %v\nwant %s", err, wantErr)
	}
	// The parent only names kinds the cluster serves (kubectl could not parse it
	// otherwise).
	parent, _ := e.cs.CoreV1().Secrets(e.parent.Namespace).Get(ctx, e.parent.Name, metav1.GetOptions{})
	if strings.Contains(parent.Annotations[apply.AnnotationContainsGroupKinds], "cilium") {
		t.Errorf("parent lists an unserved kind: %s", parent.Annotations[apply.AnnotationContainsGroupKinds])
	}
}

// TestApplyCRDThenCustomResource: a CRD and an object of its kind in one apply.
func TestApplyCRDThenCustomResource(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	group := "t" + e.id + ".pcsync.io"
	crd := &unstructured.Unstructured{}
	crdJSON := `{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition",
		"metadata":{"name":"widgets.` + group + `"},
		"spec":{"group":"` + group + `","scope":"Namespaced",
		"names":{"plural":"widgets","singular":"widget","kind":"Widget","listKind":"WidgetList"},
		"versions":[{"name":"v1","served":true,"storage":true,"schema":{"openAPIV3Schema":{"type":"object",
		"properties":{"spec":{"type":"object","properties":{"size":{"type":"integer"}}}}}}}]}}`
	if err := json.Unmarshal([]byte(crdJSON), &crd.Object); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = e.dyn.Resource(crdGVR).Delete(ctxT(t), crd.GetName(), metav1.DeleteOptions{})
	})
	objs := e.companies(1)
	widget := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": group + "/v1", "kind": "Widget",
		"metadata": map[string]any{"name": "w", "namespace": e.companyNS(0)},
		"spec":     map[string]any{"size": int64(3)},
	}}
	// Given in the "wrong" order: the widget first.
	all := append([]*unstructured.Unstructured{widget}, objs...)
	all = append(all, crd)

	// A dry run cannot create the CRD; its object is reported without a server check.
	dry := apply.DefaultApplyOptions()
	dry.DryRun = true
	r, err := e.manager().Apply(ctx, all, dry)
	if err != nil || r.Err() != nil {
		t.Fatalf("dry run: %v %v", err, r.Err())
	}
	if diff := cmp.Diff(allActions(all, apply.ActionCreated), actions(r)); diff != "" {
		t.Errorf("dry-run actions (-want +got):\n%s", diff)
	}

	r, err = e.manager().Apply(ctx, all, apply.DefaultApplyOptions())
	if err != nil || r.Err() != nil {
		t.Fatalf("apply: %v %v", err, r.Err())
	}
	if diff := cmp.Diff(allActions(all, apply.ActionCreated), actions(r)); diff != "" {
		t.Errorf("actions (-want +got):\n%s", diff)
	}
	r, err = e.manager().Apply(ctx, all, apply.DefaultApplyOptions())
	if err != nil || r.Err() != nil || r.MutatingRequests != 0 {
		t.Errorf("no-op: %v %v, %d mutating, actions %v", err, r.Err(), r.MutatingRequests, actions(r))
	}
}

// TestLongLivedManagerSeesNewKinds: a Manager (as in the daemon) that once found a
// kind missing finds it after its CRD was installed by someone else.
func TestLongLivedManagerSeesNewKinds(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	group := "l" + e.id + ".pcsync.io"
	crd := &unstructured.Unstructured{}
	crdJSON := `{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition",
		"metadata":{"name":"gadgets.` + group + `"},
		"spec":{"group":"` + group + `","scope":"Namespaced",
		"names":{"plural":"gadgets","singular":"gadget","kind":"Gadget","listKind":"GadgetList"},
		"versions":[{"name":"v1","served":true,"storage":true,"schema":{"openAPIV3Schema":{"type":"object",
		"x-kubernetes-preserve-unknown-fields":true}}}]}}`
	if err := json.Unmarshal([]byte(crdJSON), &crd.Object); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = e.dyn.Resource(crdGVR).Delete(ctxT(t), crd.GetName(), metav1.DeleteOptions{})
	})
	gadget := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": group + "/v1", "kind": "Gadget",
		"metadata": map[string]any{"name": "g", "namespace": e.companyNS(0)},
	}}
	objs := append(e.companies(1), gadget)
	daemon := e.manager()
	r, err := daemon.Apply(ctx, objs, apply.DefaultApplyOptions())
	if err != nil {
		t.Fatal(err)
	}
	wantErr := "Gadget/" + e.companyNS(0) + "/g apply failed: the cluster does not serve kind Gadget in " + group +
		"/v1: install the CustomResourceDefinition (or the operator) that provides it"
	if err := r.Err(); err == nil || err.Error() != wantErr {
		t.Errorf("error:\n got %v\nwant %s", err, wantErr)
	}
	installer := e.manager(func(o *apply.ManagerOptions) { o.ApplySet.Name = "crds" })
	if r, err := installer.Apply(ctx, []*unstructured.Unstructured{crd}, apply.DefaultApplyOptions()); err != nil || r.Err() != nil {
		t.Fatalf("install CRD: %v %v", err, r.Err())
	}
	// The CRD is Established when Apply returns (it waits).
	r, err = daemon.Apply(ctx, objs, apply.DefaultApplyOptions())
	if err != nil || r.Err() != nil {
		t.Fatalf("second apply: %v %v", err, r.Err())
	}
	if got := actions(r)["Gadget/"+e.companyNS(0)+"/g"]; got != apply.ActionCreated {
		t.Errorf("gadget: %s", got)
	}
}
