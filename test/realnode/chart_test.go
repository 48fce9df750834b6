//go:build integration

package realnode

import (
	"bytes"
	"context"
	"path"
	"path/filepath"
	"testing"
	"time"

	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/pcsync/pcsync/internal/testing/testhelm"
	"github.com/pcsync/pcsync/internal/testing/testkustomize"
)

// writeChartBase writes into fs, at /base, a kustomization of
// charts/pcsync as helm template renders it for o (the release pcsync in
// o.namespace; pcsync's image o.image tagged imageTag; the pod on the real
// node; a config repository that git-sync's stand-in never reads) and the
// Namespace a user makes before helm install, under Pod Security
// restricted as deploy/base's.
func writeChartBase(t *testing.T, fs filesys.FileSystem, o deployOverlay) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	root := repoRoot(t)
	helm, err := testhelm.Binary(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	tol := o.node.Toleration()
	objs, err := testhelm.Template(ctx, helm, filepath.Join(root, "charts", "pcsync"), "pcsync", o.namespace, map[string]any{
		"image":        map[string]any{"registry": path.Dir(o.image), "repository": path.Base(o.image), "tag": imageTag},
		"config":       map[string]any{"repo": "https://git.example.com/platform/pcsync-config.git"},
		"nodeSelector": o.node.NodeSelector(),
		"tolerations":  []any{map[string]any{"key": tol.Key, "operator": string(tol.Operator), "effect": string(tol.Effect)}},
	})
	if err != nil {
		t.Fatal(err)
	}
	var chart bytes.Buffer
	for _, obj := range objs {
		data, err := yaml.Marshal(obj.Object)
		if err != nil {
			t.Fatal(err)
		}
		chart.WriteString("---\n")
		chart.Write(data)
	}
	restricted := map[string]any{}
	for _, mode := range []string{"enforce", "audit", "warn"} {
		restricted["pod-security.kubernetes.io/"+mode] = "restricted"
	}
	if err := testkustomize.WriteYAML(fs, "/base", map[string]any{
		"kustomization.yaml": map[string]any{"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
			"resources": []any{"namespace.yaml", "chart.yaml"}},
		"namespace.yaml": map[string]any{"apiVersion": "v1", "kind": "Namespace",
			"metadata": map[string]any{"name": o.namespace, "labels": restricted}},
		"chart.yaml": chart.Bytes(),
	}); err != nil {
		t.Fatal(err)
	}
}
