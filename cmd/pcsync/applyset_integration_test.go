//go:build integration

package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pcsync/pcsync/internal/testing/testcluster"
	"github.com/pcsync/pcsync/pkg/apply"
)

// TestTakeOverApplySet moves an inventory, as a user of the old default
// (the parent in paperclip) does: a second set refuses the first's tenant,
// apply --take-over-applyset takes it, and the set it moved to then diffs
// clean.
func TestTakeOverApplySet(t *testing.T) {
	c := testcluster.Get(t)
	ctx := context.Background()
	const tenant = "paperclip-movedset"
	t.Cleanup(func() {
		_ = c.Client().CoreV1().Namespaces().Delete(context.Background(), tenant, metav1.DeleteOptions{})
	})
	oldNS, newNS := c.Namespace(t, "takeover-old", nil), c.Namespace(t, "takeover-new", nil)
	dir := t.TempDir()
	doc := "apiVersion: pcsync.io/v1alpha1\nkind: Company\nmetadata: {name: movedset}\nspec: {id: movedset-id, agents: []}\n"
	if err := os.WriteFile(filepath.Join(dir, "movedset.yaml"), []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	kc := c.KubeconfigPath()
	oldSet := []string{"--applyset", "pcsync", "--applyset-namespace", oldNS}
	newSet := []string{"--applyset", "pcsync", "--applyset-namespace", newNS}
	tests := []struct {
		name     string
		args     []string
		wantCode int
		want     string
	}{
		{"apply to the old set", append(oldSet, dir), 0, "namespace/paperclip-movedset created"},
		{"apply to the new set", append(newSet, dir), 2, "(it belongs to ApplySet " + apply.ParentID("pcsync", oldNS) + ")"},
		{"take over", append(newSet, "--take-over-applyset", oldNS+"/pcsync", dir), 0, "namespace/paperclip-movedset configured"},
		{"the new set again", append(newSet, dir), 0, "namespace/paperclip-movedset unchanged"},
		{"its own set", append(newSet, "--take-over-applyset", newNS+"/pcsync", dir), 2, "that is this set"},
		{"no name", append(newSet, "--take-over-applyset", oldNS, dir), 2, "want NAMESPACE/NAME"},
	}
	for _, tt := range tests {
		code, stdout, stderr := pcsync(t, append([]string{"apply", "--kubeconfig", kc}, tt.args...)...)
		if code != tt.wantCode || !strings.Contains(stdout+stderr, tt.want) {
			t.Errorf("%s: exit %d, want %d and %q; stdout:\n%s\nstderr:\n%s", tt.name, code, tt.wantCode, tt.want, stdout, stderr)
		}
	}
	ns, err := c.Client().CoreV1().Namespaces().Get(ctx, tenant, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := ns.Labels[apply.LabelPartOf], apply.ParentID("pcsync", newNS); got != want {
		t.Errorf("%s is part of %q, want %q", tenant, got, want)
	}
	if code, stdout, stderr := runCmd(t, newDiffCmd, kc, append(newSet, dir)...); code != 0 {
		t.Errorf("diff after the take-over: exit %d, want 0; stdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
}
