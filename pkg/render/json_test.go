package render_test

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/pcsync/pcsync/pkg/render"
)

// checkJSON checks render -o json for out, as TestGolden renders each
// case: one v1 List whose items are the rendered objects, in order.
func checkJSON(t *testing.T, out *render.Output) {
	t.Helper()
	b, err := out.JSON()
	if err != nil {
		t.Fatal(err)
	}
	var list struct {
		APIVersion string            `json:"apiVersion"`
		Kind       string            `json:"kind"`
		Items      []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(b, &list); err != nil {
		t.Fatalf("JSON: %v", err)
	}
	if list.APIVersion != "v1" || list.Kind != "List" {
		t.Errorf("JSON: apiVersion %q, kind %q; want v1 List", list.APIVersion, list.Kind)
	}
	got := make([]*unstructured.Unstructured, len(list.Items))
	for i, raw := range list.Items {
		got[i] = &unstructured.Unstructured{}
		if err := got[i].UnmarshalJSON(raw); err != nil {
			t.Fatalf("JSON item %d: %v", i, err)
		}
	}
	if diff := cmp.Diff(out.Objects, got); diff != "" {
		t.Errorf("JSON items differ from the rendered objects (-rendered +JSON):\n%s", diff)
	}
}
