package reconcile

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/pcsync/pcsync/pkg/apply"
)

// failingApplier applies every object and adds the failures it is given.
type failingApplier struct{ failures []apply.Change }

func (f failingApplier) Apply(_ context.Context, objs []*unstructured.Unstructured, _ apply.ApplyOptions) (*apply.ChangeSet, error) {
	r := &apply.ChangeSet{}
	for _, o := range objs {
		r.Objects = append(r.Objects, apply.Change{Ref: apply.RefOf(o), Action: apply.ActionUnchanged})
	}
	r.Objects = append(r.Objects, f.failures...)
	return r, nil
}

// TestFailedStage: a reconcile whose only failures are prunes failed in the prune
// stage, one where an object given failed in the apply stage; the change set's Prune
// marks tell them apart.
func TestFailedStage(t *testing.T) {
	ref := apply.ObjectRef{Version: "v1", Kind: "ConfigMap", Namespace: "paperclip-acme", Name: "x"}
	applyFailed := apply.Change{Ref: ref, Action: apply.ActionFailed, Err: errors.New("ConfigMap/paperclip-acme/x apply failed: no")}
	pruneFailed := apply.Change{Ref: ref, Action: apply.ActionFailed, Prune: true,
		Err: errors.New("ConfigMap/paperclip-acme/x prune failed: no")}
	tests := []struct {
		name     string
		failures []apply.Change
		want     Stage
	}{
		{"nothing failed", nil, ""},
		{"a prune failed", []apply.Change{pruneFailed}, StagePrune},
		{"an object given failed", []apply.Change{applyFailed}, StageApply},
		{"both failed", []apply.Change{applyFailed, pruneFailed}, StageApply},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			write(t, filepath.Join(dir, "acme.yaml"), company("acme"))
			o := DefaultOptions(dir)
			o.Logger = slog.New(slog.DiscardHandler)
			l, err := New(failingApplier{failures: tt.failures}, o)
			if err != nil {
				t.Fatal(err)
			}
			out := l.ReconcileOnce(context.Background())
			if diff := cmp.Diff(tt.want, out.FailedStage); diff != "" {
				t.Errorf("failed stage (-want +got):\n%s\nerror: %v", diff, out.Err)
			}
		})
	}
}
