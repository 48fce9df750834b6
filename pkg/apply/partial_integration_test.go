//go:build integration

package apply_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/pcsync/pcsync/pkg/apply"
)

// TestPartialApply: a partial apply sends only the objects given that
// differ, reads only where they are, and only widens the parent's
// inventory (kinds and namespaces), never narrows it; it refuses to prune.
func TestPartialApply(t *testing.T) {
	tests := []struct {
		name string
		// given are the objects of the partial apply, from the three
		// companies applied in full first and a fourth that is not.
		given func(applied, fourth []*unstructured.Unstructured) []*unstructured.Unstructured
		// want are the actions; writes the mutating requests; grown the
		// namespaces the parent gains.
		want   map[string]apply.Action
		writes int64
		grown  bool
	}{
		{"one changed object", func(applied, _ []*unstructured.Unstructured) []*unstructured.Unstructured {
			q := applied[4].DeepCopy() // company 0's ResourceQuota
			_ = unstructured.SetNestedField(q.Object, "30", "spec", "hard", "pods")
			return []*unstructured.Unstructured{q}
		}, map[string]apply.Action{"ResourceQuota/%s-c0/paperclip-quota": apply.ActionConfigured}, 1, false},
		{"one kind, unchanged", func(applied, _ []*unstructured.Unstructured) []*unstructured.Unstructured {
			return applied[2:3] // company 0's Role
		}, map[string]apply.Action{"Role/%s-c0/paperclip-tenant-role": apply.ActionUnchanged}, 0, false},
		{"a new company", func(_, fourth []*unstructured.Unstructured) []*unstructured.Unstructured {
			return fourth
		}, nil, 9, true}, // and the parent's
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			ctx := ctxT(t)
			objs := e.companies(4)
			applied, fourth := objs[:24], objs[24:]
			m := e.manager()
			if r, err := m.Apply(ctx, applied, apply.DefaultApplyOptions()); err != nil || r.Err() != nil {
				t.Fatalf("apply in full: %v %v", err, r.Err())
			}
			before := e.inventory()
			opts := apply.DefaultApplyOptions()
			opts.Partial = true
			given := tt.given(applied, fourth)
			r, err := m.Apply(ctx, given, opts)
			if err != nil || r.Err() != nil {
				t.Fatalf("partial apply: %v %v", err, r.Err())
			}
			want := map[string]apply.Action{}
			for ref, a := range tt.want {
				want[fmt.Sprintf(ref, "t"+e.id)] = a
			}
			if tt.want == nil {
				want = allActions(fourth, apply.ActionCreated)
			}
			if diff := cmp.Diff(want, actions(r)); diff != "" {
				t.Errorf("actions (-want +got):\n%s", diff)
			}
			if r.MutatingRequests != tt.writes {
				t.Errorf("%d writes, want %d", r.MutatingRequests, tt.writes)
			}
			// The parent's read, one read per kind given in one namespace
			// (or of a cluster-scoped object), and for a new company its
			// Namespace's, to see whose it is.
			if kinds := len(kindsOf(given)); r.ReadRequests > int64(2+kinds) {
				t.Errorf("%d reads, want at most %d", r.ReadRequests, 2+kinds)
			}
			wantInv := before
			if tt.grown {
				wantInv.namespaces = before.namespaces + "," + e.companyNS(3)
			}
			if diff := cmp.Diff(wantInv, e.inventory(), cmp.AllowUnexported(inventoryNotes{})); diff != "" {
				t.Errorf("parent's inventory (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPartialApplyRefuses: a partial apply with prune, or without the
// parent, is refused before anything is sent.
func TestPartialApplyRefuses(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	objs := e.companies(1)
	opts := apply.DefaultApplyOptions()
	opts.Partial = true
	r, err := e.manager().Apply(ctx, objs, opts)
	if !errors.Is(err, apply.ErrPartialNoParent) || r.MutatingRequests != 0 {
		t.Errorf("without the parent: %v, %d writes; want ErrPartialNoParent and none", err, r.MutatingRequests)
	}
	if _, err := e.cs.CoreV1().Secrets(e.parent.Namespace).Get(ctx, e.parent.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the parent: %v, want not found", err)
	}
	opts.Prune = true
	if r, err := e.manager().Apply(ctx, objs, opts); err == nil || r.MutatingRequests != 0 {
		t.Errorf("with prune: %v, %d writes; want an error and none", err, r.MutatingRequests)
	}
}

// TestPartialApplyTakesOver: a partial apply takes the members of a set
// named in Handover.From (a company moved between shards).
func TestPartialApplyTakesOver(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	objs := e.companies(2)
	m := e.manager()
	if r, err := m.Apply(ctx, objs[:8], apply.DefaultApplyOptions()); err != nil || r.Err() != nil {
		t.Fatalf("apply in full: %v %v", err, r.Err())
	}
	other := newEnv(t)
	if r, err := other.manager().Apply(ctx, objs[8:], apply.DefaultApplyOptions()); err != nil || r.Err() != nil {
		t.Fatalf("the other set: %v %v", err, r.Err())
	}
	opts := apply.DefaultApplyOptions()
	opts.Partial = true
	opts.Handover.From = []string{other.manager().ApplySetID()}
	r, err := m.Apply(ctx, objs[8:], opts)
	if err != nil || r.Err() != nil {
		t.Fatalf("partial apply: %v %v", err, r.Err())
	}
	if diff := cmp.Diff(allActions(objs[8:], apply.ActionConfigured), actions(r)); diff != "" {
		t.Errorf("actions (-want +got):\n%s", diff)
	}
	if got := e.inventory().namespaces; got != e.companyNS(0)+","+e.companyNS(1) {
		t.Errorf("parent's namespaces %q, want both companies'", got)
	}
}

// inventoryNotes are the parent's inventory annotations.
type inventoryNotes struct{ kinds, namespaces string }

func (e *env) inventory() inventoryNotes {
	e.t.Helper()
	s, err := e.cs.CoreV1().Secrets(e.parent.Namespace).Get(ctxT(e.t), e.parent.Name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return inventoryNotes{kinds: s.Annotations[apply.AnnotationContainsGroupKinds],
		namespaces: s.Annotations[apply.AnnotationAdditionalNamespaces]}
}

func kindsOf(objs []*unstructured.Unstructured) map[string]bool {
	out := map[string]bool{}
	for _, o := range objs {
		out[o.GetKind()] = true
	}
	return out
}
