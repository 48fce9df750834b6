//go:build integration

package apply_test

import (
	"encoding/base64"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/pcsync/pcsync/pkg/apply"
)

func secretObj(ns string, data map[string]string) *unstructured.Unstructured {
	d := map[string]any{}
	for k, v := range data {
		d[k] = base64.StdEncoding.EncodeToString([]byte(v))
	}
	return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Secret",
		"metadata": map[string]any{"name": "agent-keys", "namespace": ns}, "type": "Opaque", "data": d}}
}

// TestDiff: kubectl-diff-like output with Secret values masked, deletions for what
// prune would remove, and nothing written.
func TestDiff(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	objs := e.companies(2)
	ns := e.companyNS(0)
	secret := secretObj(ns, map[string]string{"same": "s3cr3t-same", "changed": "old-value-1", "removed": "gone-value"})
	all := append(slices.Clone(objs), secret)
	if r, err := e.manager().Apply(ctx, all, apply.DefaultApplyOptions()); err != nil || r.Err() != nil {
		t.Fatalf("apply: %v %v", err, r.Err())
	}

	d, err := e.manager().Diff(ctx, all, apply.DefaultDiffOptions())
	if err != nil || d.Err() != nil {
		t.Fatalf("diff: %v %v", err, d.Err())
	}
	if d.Changed() || d.MutatingRequests != 0 {
		t.Errorf("diff of an unchanged set: changed %v, %d mutating requests", d.Changed(), d.MutatingRequests)
	}

	// Change the Secret (one value changed, one removed, one added), a Role rule, and
	// drop company 1 (prune shows it as deletions).
	newSecret := secretObj(ns, map[string]string{"same": "s3cr3t-same", "changed": "new-value-2", "added": "fresh-value"})
	changed := slices.Clone(objs[:8])
	role := changed[2].DeepCopy()
	_ = unstructured.SetNestedSlice(role.Object, []any{map[string]any{"apiGroups": []any{""},
		"resources": []any{"pods/log", "pods"}, "verbs": []any{"get"}}}, "rules")
	changed[2] = role
	changed = append(changed, newSecret)
	opts := apply.DefaultDiffOptions()
	opts.Prune = true
	d, err = e.manager().Diff(ctx, changed, opts)
	if err != nil || d.Err() != nil {
		t.Fatalf("diff: %v %v", err, d.Err())
	}
	if !d.Changed() {
		t.Error("Changed() = false")
	}
	got := map[string]apply.Action{}
	diffs := map[string]string{}
	for _, o := range d.Objects {
		got[o.Ref.String()] = o.Action
		diffs[o.Ref.String()] = o.Diff
	}
	want := allActions(objs[:8], apply.ActionUnchanged)
	want["Role/"+ns+"/paperclip-tenant-role"] = apply.ActionConfigured
	want["Secret/"+ns+"/agent-keys"] = apply.ActionConfigured
	for k := range allActions(objs[8:], apply.ActionPruned) {
		want[k] = apply.ActionPruned
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("actions (-want +got):\n%s", diff)
	}

	sd := diffs["Secret/"+ns+"/agent-keys"]
	for _, v := range []string{"s3cr3t-same", "old-value-1", "new-value-2", "gone-value", "fresh-value"} {
		for _, enc := range []string{v, base64.StdEncoding.EncodeToString([]byte(v))} {
			if strings.Contains(sd, enc) {
				t.Errorf("Secret diff leaks %q:\n%s", enc, sd)
			}
		}
	}
	for _, line := range []string{
		"--- live/v1.Secret." + ns + ".agent-keys",
		"+++ merged/v1.Secret." + ns + ".agent-keys",
		"-  changed: '*** (before)'",
		"+  changed: '*** (after)'",
		"-  removed: '***'",
		"+  added: '***'",
		"   same: '***'",
	} {
		if !strings.Contains(sd, line+"\n") {
			t.Errorf("Secret diff lacks line %q:\n%s", line, sd)
		}
	}
	rd := diffs["Role/"+ns+"/paperclip-tenant-role"]
	if !strings.Contains(rd, "+  - pods\n") || strings.Contains(rd, "managedFields") || strings.Contains(rd, "resourceVersion") ||
		strings.Contains(rd, "uid:") || strings.Contains(rd, "creationTimestamp") {
		t.Errorf("Role diff:\n%s", rd)
	}
	nsDiff := diffs["Namespace/"+e.companyNS(1)]
	header := "--- live/v1.Namespace." + e.companyNS(1) + "\n+++ merged/v1.Namespace." + e.companyNS(1) + "\n@@ -1,"
	if body, ok := strings.CutPrefix(nsDiff, header); !ok || strings.Contains(body, "\n+") {
		t.Errorf("pruned Namespace diff is not a deletion:\n%s", nsDiff)
	}

	// Diff wrote nothing.
	s, err := e.cs.CoreV1().Secrets(ns).Get(ctx, "agent-keys", metav1.GetOptions{})
	if err != nil || string(s.Data["changed"]) != "old-value-1" {
		t.Errorf("diff changed the Secret: %v", err)
	}
}

// TestDiffNewObjects: objects that do not exist yet, in a namespace that does not exist
// yet, diff as creations.
func TestDiffNewObjects(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	objs := e.companies(1)
	d, err := e.manager().Diff(ctx, objs, apply.DefaultDiffOptions())
	if err != nil || d.Err() != nil {
		t.Fatalf("diff: %v %v", err, d.Err())
	}
	for _, o := range d.Objects {
		if o.Action != apply.ActionCreated || !strings.Contains(o.Diff, "@@ -0,0 +1,") {
			t.Errorf("%s: %s\n%s", o.Ref, o.Action, o.Diff)
		}
	}
	if _, err := e.cs.CoreV1().Namespaces().Get(ctx, e.companyNS(0), metav1.GetOptions{}); err == nil {
		t.Error("diff created the namespace")
	}
}

// TestImmutableFieldAndForce: a changed roleRef cannot be applied in place; Force
// deletes and recreates the RoleBinding.
func TestImmutableFieldAndForce(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	objs := e.companies(1)
	if r, err := e.manager().Apply(ctx, objs, apply.DefaultApplyOptions()); err != nil || r.Err() != nil {
		t.Fatalf("apply: %v %v", err, r.Err())
	}
	ns := e.companyNS(0)
	changed := slices.Clone(objs)
	rb := changed[3].DeepCopy()
	_ = unstructured.SetNestedField(rb.Object, "other-role", "roleRef", "name")
	changed[3] = rb
	r, err := e.manager().Apply(ctx, changed, apply.DefaultApplyOptions())
	if err != nil {
		t.Fatal(err)
	}
	wantErr := "RoleBinding/" + ns + "/paperclip-tenant-rb apply failed: immutable field: roleRef: cannot change roleRef; " +
		"pass --force to delete and recreate the object"
	if err := r.Err(); err == nil || err.Error() != wantErr || !errors.Is(err, apply.ErrImmutable) {
		t.Errorf("error:\n got %v\nwant %s", err, wantErr)
	}
	old, _ := e.cs.RbacV1().RoleBindings(ns).Get(ctx, "paperclip-tenant-rb", metav1.GetOptions{})

	opts := apply.DefaultApplyOptions()
	opts.Force = true
	r, err = e.manager().Apply(ctx, changed, opts)
	if err != nil || r.Err() != nil {
		t.Fatalf("forced apply: %v %v", err, r.Err())
	}
	if got := actions(r)["RoleBinding/"+ns+"/paperclip-tenant-rb"]; got != apply.ActionRecreated {
		t.Errorf("action = %s, want recreated", got)
	}
	now, err := e.cs.RbacV1().RoleBindings(ns).Get(ctx, "paperclip-tenant-rb", metav1.GetOptions{})
	if err != nil || now.RoleRef.Name != "other-role" || now.UID == old.UID {
		t.Errorf("after --force: %v, roleRef %s, same uid %v", err, now.RoleRef.Name, now.UID == old.UID)
	}
}

// TestDryRunAndWait: a dry run creates nothing; Wait waits for current objects and
// names those that never get there.
func TestDryRunAndWait(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	objs := e.companies(1)
	opts := apply.DefaultApplyOptions()
	opts.DryRun = true
	r, err := e.manager().Apply(ctx, objs, opts)
	if err != nil || r.Err() != nil {
		t.Fatalf("dry run: %v %v", err, r.Err())
	}
	if diff := cmp.Diff(allActions(objs, apply.ActionCreated), actions(r)); diff != "" {
		t.Errorf("dry-run actions (-want +got):\n%s", diff)
	}
	if _, err := e.cs.CoreV1().Namespaces().Get(ctx, e.companyNS(0), metav1.GetOptions{}); err == nil {
		t.Error("dry run created the namespace")
	}
	if _, err := e.cs.CoreV1().Namespaces().Get(ctx, e.parent.Namespace, metav1.GetOptions{}); err == nil {
		t.Error("dry run created the parent's namespace")
	}

	opts = apply.DefaultApplyOptions()
	opts.Wait = true
	opts.Timeout = 20 * time.Second
	if r, err := e.manager().Apply(ctx, objs, opts); err != nil || r.Err() != nil {
		t.Fatalf("apply --wait: %v %v", err, r.Err())
	}

	// A PVC that no provisioner binds never becomes current.
	pvc := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "PersistentVolumeClaim",
		"metadata": map[string]any{"name": "paperclip-sessions", "namespace": e.companyNS(0)},
		"spec": map[string]any{"accessModes": []any{"ReadWriteMany"}, "storageClassName": "none",
			"resources": map[string]any{"requests": map[string]any{"storage": "1Gi"}}}}}
	opts.Timeout = 3 * time.Second
	_, err = e.manager().Apply(ctx, append(slices.Clone(objs), pvc), opts)
	want := "timed out after 3s waiting for 1 object(s) to become ready: PersistentVolumeClaim/" + e.companyNS(0) +
		"/paperclip-sessions: InProgress: PVC is not Bound. phase: Pending"
	if err == nil || err.Error() != want {
		t.Errorf("wait error:\n got %v\nwant %s", err, want)
	}
}
