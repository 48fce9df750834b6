//go:build integration

package apply_test

import (
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/pcsync/pcsync/pkg/apply"
)

// TestKubectlApplySetInterop checks pcsync's inventory against kubectl 1.32's own
// ApplySet code (KUBECTL_APPLYSET=true):
//
//   - kubectl computes the same ID: the parent kubectl creates carries exactly
//     apply.ApplySetID for its name and namespace, and pcsync refuses to take over a
//     set whose tooling is kubectl;
//   - kubectl reads pcsync's parent as an ApplySet parent and, as the specification
//     asks, refuses to change a set of another tool, with its exact message;
//   - when the set's tooling says kubectl, kubectl parses the parent's ID label,
//     contains-group-kinds and additional-namespaces and finds every member across
//     the companies' namespaces: a server-side dry-run prune lists exactly the members
//     not in its input;
//   - `kubectl get -l applyset.kubernetes.io/part-of=<id>` lists the members.
func TestKubectlApplySetInterop(t *testing.T) {
	t.Run("kubectl computes the same ID and pcsync refuses its set", func(t *testing.T) {
		e := newEnv(t)
		ctx := ctxT(t)
		ns := e.c.Namespace(t, "kubectl-set", nil)
		cm := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": "cm", "namespace": ns}, "data": map[string]any{"a": "b"}}}
		out, errOut, err := e.kubectl("apply", "--server-side", "--prune", "--applyset=kset", "-n", ns,
			"-f", e.writeManifest([]*unstructured.Unstructured{cm}))
		if err != nil {
			t.Fatalf("kubectl: %v\n%s%s", err, out, errOut)
		}
		parent, err := e.cs.CoreV1().Secrets(ns).Get(ctx, "kset", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		want := apply.ApplySetID("kset", ns, schema.GroupKind{Kind: "Secret"})
		if got := parent.Labels[apply.LabelApplySetID]; got != want {
			t.Errorf("kubectl's ID %s, apply.ApplySetID %s", got, want)
		}
		m := e.manager(func(o *apply.ManagerOptions) { o.ApplySet = apply.ParentRef{Name: "kset", Namespace: ns} })
		_, err = m.Apply(ctx, e.companies(1), apply.DefaultApplyOptions())
		wantErr := `ApplySet parent Secret/` + ns + `/kset is managed by tooling "kubectl", not "pcsync"; ` +
			`refusing to change it (choose another --applyset name)`
		if err == nil || err.Error() != wantErr {
			t.Errorf("pcsync on kubectl's set:\n got %v\nwant %s", err, wantErr)
		}
	})

	t.Run("kubectl refuses to change pcsync's set", func(t *testing.T) {
		e := newEnv(t)
		ctx := ctxT(t)
		objs := e.companies(2)
		if r, err := e.manager().Apply(ctx, objs, apply.DefaultApplyOptions()); err != nil || r.Err() != nil {
			t.Fatalf("apply: %v %v", err, r.Err())
		}
		file := e.writeManifest(tenantObjects(e.companyNS(0), "company-0")[:1])
		_, errOut, err := e.kubectl("apply", "--server-side", "--prune", "--applyset="+e.parent.Name,
			"-n", e.parent.Namespace, "--dry-run=server", "-f", file)
		want := `error: ApplySet parent object "secrets./pcsync" already exists and is managed by tooling "pcsync" ` +
			`instead of "kubectl"` + "\n"
		if err == nil || errOut != want {
			t.Errorf("kubectl on pcsync's set: err %v, stderr:\n got %q\nwant %q", err, errOut, want)
		}
	})

	t.Run("kubectl parses the parent and finds every member", func(t *testing.T) {
		e := newEnv(t)
		ctx := ctxT(t)
		objs := e.companies(2)
		m := e.manager(func(o *apply.ManagerOptions) { o.ToolingName = "kubectl" })
		if r, err := m.Apply(ctx, objs, apply.DefaultApplyOptions()); err != nil || r.Err() != nil {
			t.Fatalf("apply: %v %v", err, r.Err())
		}
		// kubectl applies only objects of the parent's namespace or cluster-scoped
		// ones: give it company 0's Namespace; everything else is to be pruned.
		file := e.writeManifest(objs[:1])
		out, errOut, err := e.kubectl("apply", "--server-side", "--force-conflicts", "--prune",
			"--applyset="+e.parent.Name, "-n", e.parent.Namespace, "--dry-run=server", "-f", file)
		if err != nil {
			t.Fatalf("kubectl: %v\n%s%s", err, out, errOut)
		}
		var pruned []string
		for _, line := range strings.Split(out, "\n") {
			if name, ok := strings.CutSuffix(line, " pruned (server dry run)"); ok {
				pruned = append(pruned, name)
			}
		}
		var want []string
		for _, o := range objs[1:] {
			want = append(want, apply.RefOf(o).KubectlName())
		}
		sort.Strings(pruned)
		sort.Strings(want)
		if diff := cmp.Diff(want, pruned); diff != "" {
			t.Errorf("kubectl's prune set (-want +got):\n%s\nstdout:\n%s\nstderr:\n%s", diff, out, errOut)
		}
		// Nothing was deleted (server dry run).
		if _, err := e.cs.CoreV1().Namespaces().Get(ctx, e.companyNS(1), metav1.GetOptions{}); err != nil {
			t.Errorf("dry run deleted: %v", err)
		}

		out, errOut, err = e.kubectl("get", "namespaces,roles,networkpolicies", "-A", "-o", "name",
			"-l", apply.LabelPartOf+"="+m.ApplySetID())
		if err != nil {
			t.Fatalf("kubectl get: %v\n%s", err, errOut)
		}
		if n := len(strings.Fields(out)); n != 2+2+4 {
			t.Errorf("kubectl get by part-of label found %d objects, want 8:\n%s", n, out)
		}
	})
}
