//go:build integration

package apply_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/pcsync/pcsync/pkg/apply"
)

// withCompanyOwner makes the company label the owner an adoption mark must
// name, as cmd/pcsync does.
func withCompanyOwner(o *apply.ManagerOptions) { o.OwnerLabel = "paperclip.io/company" }

// foreignSnapshot is what must not change in a namespace pcsync does not own:
// every object in it, by kind and name, with its resourceVersion.
func (e *env) foreignSnapshot(ctx context.Context, ns string) map[string]string {
	e.t.Helper()
	out := map[string]string{}
	nsObj, err := e.cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	out["Namespace/"+ns] = nsObj.ResourceVersion
	for _, gvr := range []schema.GroupVersionResource{
		{Version: "v1", Resource: "pods"}, {Version: "v1", Resource: "configmaps"},
		{Version: "v1", Resource: "serviceaccounts"}, {Version: "v1", Resource: "resourcequotas"},
		{Version: "v1", Resource: "limitranges"},
		{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "roles"},
		{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "rolebindings"},
		{Group: "networking.k8s.io", Version: "v1", Resource: "networkpolicies"},
	} {
		l, err := e.dyn.Resource(gvr).Namespace(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			e.t.Fatal(err)
		}
		for _, u := range l.Items {
			k := gvr.Resource + "/" + u.GetName()
			switch k {
			case "configmaps/kube-root-ca.crt", "serviceaccounts/default":
				continue // Kubernetes' controllers make these, at their own pace
			case "pods/server":
				// The scheduler and the node write its status: compare what
				// anyone but them writes.
				var managers []string
				for _, f := range u.GetManagedFields() {
					if f.Subresource == "" {
						managers = append(managers, f.Manager)
					}
				}
				sort.Strings(managers)
				out[k] = fmt.Sprint(u.GetLabels(), u.GetAnnotations(), managers)
				continue
			}
			out[k] = u.GetResourceVersion()
		}
	}
	return out
}

// failedNotOwned returns the refs of the change set's objects that failed
// with ErrNotOwned, sorted.
func failedNotOwned(r *apply.ChangeSet) []string {
	var out []string
	for _, o := range r.Objects {
		if o.Action == apply.ActionFailed && errors.Is(o.Err, apply.ErrNotOwned) {
			out = append(out, o.Ref.String())
		}
	}
	sort.Strings(out)
	return out
}

func refsOf(objs []*unstructured.Unstructured) []string {
	var out []string
	for _, o := range objs {
		out = append(out, apply.RefOf(o).String())
	}
	sort.Strings(out)
	return out
}

// TestForeignNamespaceLeftAlone: a company renders to a namespace that
// exists and is someone else's (a pod, a ConfigMap, a NetworkPolicy of the
// same name as pcsync's). Apply and Diff send nothing for that company and
// say whose the namespace is and how to adopt it; the other company applies.
// Marked for adoption, the namespace is taken but the foreign NetworkPolicy
// still needs its own mark; marked too, it is taken. A later prune deletes
// only what pcsync created there and releases what it adopted: the pod, the
// ConfigMap, the namespace and the NetworkPolicy stay.
func TestForeignNamespaceLeftAlone(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	objs := e.companies(2)
	foreign, ours := objs[:8], objs[8:]
	ns := e.companyNS(0)

	// The namespace and its objects, made by others (not with pcsync's field manager).
	if _, err := e.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name: ns, Labels: map[string]string{"app": "paperclip-server"}}}, metav1.CreateOptions{FieldManager: "helm"}); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "server"}, Spec: corev1.PodSpec{
		Containers: []corev1.Container{{Name: "server", Image: "paperclip:1"}}}}
	if _, err := e.cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings"}, Data: map[string]string{"db": "postgres"}}
	if _, err := e.cs.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	np := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "paperclip-deny-all"},
		Spec: networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}}}
	if _, err := e.cs.NetworkingV1().NetworkPolicies(ns).Create(ctx, np, metav1.CreateOptions{FieldManager: "kubectl-create"}); err != nil {
		t.Fatal(err)
	}
	before := e.foreignSnapshot(ctx, ns)
	m := e.manager(withCompanyOwner)

	// Diff and apply (with prune): company-0 is refused whole, company-1 applies.
	d, err := m.Diff(ctx, objs, apply.DiffOptions{Prune: true})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(refsOf(foreign), failedNotOwned(d)); diff != "" {
		t.Errorf("diff: objects refused (-want +got):\n%s", diff)
	}
	opts := apply.DefaultApplyOptions()
	opts.Prune = true
	r, err := m.Apply(ctx, objs, opts)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(refsOf(foreign), failedNotOwned(r)); diff != "" {
		t.Errorf("apply: objects refused (-want +got):\n%s", diff)
	}
	for _, o := range ours {
		if got := actions(r)[apply.RefOf(o).String()]; got != apply.ActionCreated {
			t.Errorf("%s: %s, want created (the other company applies)", apply.RefOf(o), got)
		}
	}
	var nsErr string
	for _, o := range r.Objects {
		if o.Ref.String() == "Namespace/"+ns {
			nsErr = o.Err.Error()
		}
	}
	for _, want := range []string{
		"Namespace/" + ns + " apply failed: Namespace/" + ns + " exists and is not in ApplySet ",
		"field managers: helm;", "labels: app=paperclip-server, kubernetes.io/metadata.name=" + ns + ";",
		"it is left as it is. To adopt it on purpose: kubectl annotate namespace/" + ns + " pcsync.io/adopt=company-0",
	} {
		if !strings.Contains(nsErr, want) {
			t.Errorf("the namespace's error lacks %q:\n%s", want, nsErr)
		}
	}
	// A second apply (the daemon's next reconcile) changes nothing either.
	if _, err := m.Apply(ctx, objs, opts); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(before, e.foreignSnapshot(ctx, ns)); diff != "" {
		t.Fatalf("the foreign namespace changed (-before +after):\n%s", diff)
	}

	// Adopt the namespace: it is taken, the foreign NetworkPolicy is not.
	if _, _, err := e.kubectl("annotate", "namespace", ns, "pcsync.io/adopt=company-0"); err != nil {
		t.Fatal(err)
	}
	r, err = m.Apply(ctx, objs, opts)
	if err != nil {
		t.Fatal(err)
	}
	denyRef := "NetworkPolicy/" + ns + "/paperclip-deny-all"
	if diff := cmp.Diff([]string{denyRef}, failedNotOwned(r)); diff != "" {
		t.Errorf("after adopting the namespace, refused (-want +got):\n%s", diff)
	}
	for _, o := range r.Objects {
		if o.Ref.String() == denyRef && !strings.Contains(o.Err.Error(),
			"kubectl annotate --namespace "+ns+" networkpolicy.networking.k8s.io/paperclip-deny-all pcsync.io/adopt=company-0") {
			t.Errorf("the NetworkPolicy's error lacks the adopt command: %v", o.Err)
		}
	}
	if _, _, err := e.kubectl("annotate", "--namespace", ns, "networkpolicy/paperclip-deny-all", "pcsync.io/adopt=company-0"); err != nil {
		t.Fatal(err)
	}
	r, err = m.Apply(ctx, objs, opts)
	if err != nil || r.Err() != nil {
		t.Fatalf("apply after adopting: %v %v", err, r.Err())
	}
	live, err := e.cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if live.Labels["pod-security.kubernetes.io/enforce"] != "restricted" {
		t.Errorf("adopted namespace labels: %v", live.Labels)
	}

	// Remove company-0: prune deletes what pcsync made there and releases
	// the namespace and the NetworkPolicy it adopted.
	opts.PruneFloor = 1
	r, err = m.Apply(ctx, ours, opts)
	if err != nil || r.Err() != nil {
		t.Fatalf("prune: %v %v", err, r.Err())
	}
	got := map[string]apply.Action{}
	for _, o := range r.Objects {
		if o.Prune {
			got[o.Ref.String()] = o.Action
		}
	}
	want := map[string]apply.Action{}
	for _, o := range foreign {
		want[apply.RefOf(o).String()] = apply.ActionPruned
	}
	want["Namespace/"+ns], want[denyRef] = apply.ActionReleased, apply.ActionReleased
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("prune (-want +got):\n%s", diff)
	}
	after := e.foreignSnapshot(ctx, ns)
	for _, k := range []string{"pods/server", "configmaps/settings"} {
		if after[k] != before[k] {
			t.Errorf("%s changed: resourceVersion %s, was %s", k, after[k], before[k])
		}
	}
	if _, ok := after["networkpolicies/paperclip-deny-all"]; !ok {
		t.Error("the adopted NetworkPolicy was deleted")
	}
	live, err = e.cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wantLabels := map[string]string{"app": "paperclip-server", "kubernetes.io/metadata.name": ns}
	if diff := cmp.Diff(wantLabels, live.Labels); diff != "" {
		t.Errorf("released namespace labels (-want +got):\n%s", diff)
	}
	if live.DeletionTimestamp != nil {
		t.Error("the released namespace is being deleted")
	}
	// Released means no longer a member: the next prune has nothing to do.
	r, err = m.Apply(ctx, ours, opts)
	if err != nil || r.Changed() {
		t.Errorf("apply after the release: %v, changed %v", err, r.Changed())
	}
}

// TestParentNamespaceNeverTaken: a tenant Namespace named like the ApplySet
// parent's namespace is refused, adoption mark or not.
func TestParentNamespaceNeverTaken(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	objs := tenantObjects(e.parent.Namespace, "company-x")
	r, err := e.manager(withCompanyOwner).Apply(ctx, objs, apply.DefaultApplyOptions())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(refsOf(objs), failedNotOwned(r)); diff != "" {
		t.Errorf("refused (-want +got):\n%s", diff)
	}
	msg := r.Objects[0].Err.Error()
	if want := "it is the namespace of the ApplySet parent Secret/" + e.parent.Namespace + "/pcsync, which the set never takes"; !strings.Contains(msg, want) {
		t.Errorf("error %q lacks %q", msg, want)
	}
}

// TestOtherApplySetsNamespace: a namespace that belongs to another ApplySet
// is refused with the set named.
func TestOtherApplySetsNamespace(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	objs := e.companies(1)
	other := newEnv(t)
	if r, err := other.manager().Apply(ctx, objs[:1], apply.DefaultApplyOptions()); err != nil || r.Err() != nil {
		t.Fatalf("other set: %v %v", err, r.Err())
	}
	r, err := e.manager(withCompanyOwner).Apply(ctx, objs, apply.DefaultApplyOptions())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(refsOf(objs), failedNotOwned(r)); diff != "" {
		t.Errorf("refused (-want +got):\n%s", diff)
	}
	if msg := r.Objects[0].Err.Error(); !strings.Contains(msg, "(it belongs to ApplySet applyset-") {
		t.Errorf("error lacks the other set: %s", msg)
	}
}
