//go:build integration

package cilium

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	"github.com/pcsync/pcsync/internal/testing/testcluster"
	"github.com/pcsync/pcsync/pkg/apply"
	"github.com/pcsync/pcsync/pkg/config"
	"github.com/pcsync/pcsync/pkg/render"
)

// This package's control plane serves Cilium's CRD: no test here may count
// on the kind not being served (pkg/apply's TestApplyMissingKind does, in
// its own control plane).
func TestMain(m *testing.M) { os.Exit(testcluster.Main(m)) }

var cnpGVR = schema.GroupVersionResource{Group: "cilium.io", Version: "v2", Resource: "ciliumnetworkpolicies"}

// TestRenderedCiliumPoliciesPassCiliumsSchema: examples/config, in egress
// mode cilium (its Settings' mode switched from the default), is rendered and applied as pcsync apply does, on an API server
// that serves Cilium's CiliumNetworkPolicy CRD: every rendered
// CiliumNetworkPolicy is accepted by Cilium's schema and stored as
// rendered. The control that the schema is there: the same policy with a
// protocol Cilium does not know is rejected as invalid.
func TestRenderedCiliumPoliciesPassCiliumsSchema(t *testing.T) {
	c := testcluster.Get(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := c.InstallCiliumCRD(ctx); err != nil {
		t.Fatal(err)
	}
	m, err := config.Load(ctx, ciliumExamples(t), config.DefaultLoadOptions())
	if err != nil {
		t.Fatal(err)
	}
	out, err := render.Render(m, render.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	var cnps []*unstructured.Unstructured
	for _, o := range out.Objects {
		if o.GetKind() == "CiliumNetworkPolicy" {
			cnps = append(cnps, o)
		}
	}
	if len(cnps) == 0 {
		t.Fatal("examples/config renders no CiliumNetworkPolicy: nothing to check")
	}
	mgr, err := apply.NewManager(c.RESTConfig(), apply.DefaultManagerOptions())
	if err != nil {
		t.Fatal(err)
	}
	r, err := mgr.Apply(ctx, out.Objects, apply.DefaultApplyOptions())
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Err(); err != nil {
		t.Fatalf("apply: %v", err)
	}
	for _, want := range cnps {
		got, err := c.Dynamic().Resource(cnpGVR).Namespace(want.GetNamespace()).Get(ctx, want.GetName(), metav1.GetOptions{})
		if err != nil {
			t.Errorf("CiliumNetworkPolicy/%s/%s: %v", want.GetNamespace(), want.GetName(), err)
			continue
		}
		if w, g := specJSON(t, want), specJSON(t, got); w != g {
			t.Errorf("CiliumNetworkPolicy/%s/%s stored otherwise than rendered (the schema pruned or changed it):\nrendered %s\nstored   %s",
				want.GetNamespace(), want.GetName(), w, g)
		}
	}
	t.Logf("%d CiliumNetworkPolicies of %d objects accepted by Cilium %s's schema", len(cnps), len(out.Objects), testcluster.CiliumVersion)

	broken := cnps[0].DeepCopy()
	broken.SetName("broken")
	egress, _, _ := unstructured.NestedSlice(broken.Object, "spec", "egress")
	rule := egress[0].(map[string]any)
	toPorts := rule["toPorts"].([]any)
	ports := toPorts[0].(map[string]any)["ports"].([]any)
	ports[0].(map[string]any)["protocol"] = "BOGUS"
	if err := unstructured.SetNestedSlice(broken.Object, egress, "spec", "egress"); err != nil {
		t.Fatal(err)
	}
	data, err := broken.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Dynamic().Resource(cnpGVR).Namespace(broken.GetNamespace()).Patch(ctx, "broken", "application/apply-patch+yaml", data,
		metav1.PatchOptions{FieldManager: "pcsync-test", Force: ptr.To(true)})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "protocol") {
		t.Errorf("a CiliumNetworkPolicy with protocol BOGUS: %v; want it rejected as invalid, naming the protocol", err)
	}
}

func specJSON(t *testing.T, o *unstructured.Unstructured) string {
	t.Helper()
	b, err := json.Marshal(o.Object["spec"])
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// ciliumExamples copies examples/config into a temporary directory with its
// Settings' egress mode set to cilium, and returns the copy.
func ciliumExamples(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS("../../examples/config")); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "settings.yaml")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	switched := strings.Replace(string(data), "    mode: proxy\n", "    mode: cilium\n", 1)
	if switched == string(data) {
		t.Fatalf("%s has no \"    mode: proxy\" line to switch", path)
	}
	if err := os.WriteFile(path, []byte(switched), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}
