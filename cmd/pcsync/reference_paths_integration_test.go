//go:build integration

package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/pcsync/pcsync/internal/testing/testcluster"
)

// TestReferencePathsSameDiff runs `pcsync diff` on examples/config (in namespaces
// of its own, in its egress mode, proxy: the test cluster serves no Cilium) with and
// without --reference-paths, before anything is applied, once applied and after
// another manager edited a field, and requires byte-identical output and exit
// codes.
func TestReferencePathsSameDiff(t *testing.T) {
	c := testcluster.Get(t)
	t.Setenv(referencePathsEnv, "")
	dir := t.TempDir()
	src := filepath.Join("..", "..", "examples", "config")
	err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if rel == "settings.yaml" {
			data = []byte(strings.Replace(string(data), "namespacePrefix: paperclip-", "namespacePrefix: refpaths-", 1))
		}
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(rel)), 0o755); err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, rel), data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{"refpaths-acme-labs", "refpaths-globex", "refpaths-initech"} {
		t.Cleanup(func() {
			_ = c.Client().CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{})
		})
	}
	args := []string{"--kubeconfig", c.KubeconfigPath(), "--applyset", "pcsync-refpaths"}
	type result struct {
		Code           int
		Stdout, Stderr string
	}
	pcsyncResult := func(args ...string) result {
		code, stdout, stderr := pcsync(t, args...)
		return result{code, stdout, stderr}
	}
	same := func(stage string, wantCode int) {
		t.Helper()
		fast := pcsyncResult(append([]string{"diff"}, append(args, dir)...)...)
		ref := pcsyncResult(append([]string{"--reference-paths", "diff"}, append(args, dir)...)...)
		if diff := cmp.Diff(fast, ref); diff != "" {
			t.Errorf("%s: pcsync diff --reference-paths differs (-fast +reference):\n%s", stage, diff)
		}
		lines := strings.Split(strings.TrimSpace(fast.Stderr), "\n")
		t.Logf("%s: exit %d, %d bytes of diff, %s", stage, fast.Code, len(fast.Stdout), lines[len(lines)-1])
		if fast.Code != wantCode {
			t.Errorf("%s: pcsync diff exit code %d, want %d; stderr:\n%s", stage, fast.Code, wantCode, fast.Stderr)
		}
	}

	same("nothing applied", 1)
	if r := pcsyncResult(append([]string{"apply"}, append(args, dir)...)...); r.Code != 0 {
		t.Fatalf("pcsync apply: exit code %d\n%s", r.Code, r.Stderr)
	}
	same("applied", 0)
	if _, err := c.Client().CoreV1().ResourceQuotas("refpaths-globex").Patch(context.Background(), "paperclip-quota",
		types.MergePatchType, []byte(`{"spec":{"hard":{"pods":"99"}}}`), metav1.PatchOptions{FieldManager: "kubectl-edit"}); err != nil {
		t.Fatal(err)
	}
	same("edited by another manager", 1)
}
