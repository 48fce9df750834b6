package render

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"
)

// TestMarshalObjectMatchesSigsYAML proves that the direct encoder gives
// the bytes of sigs.k8s.io/yaml (what kubectl and kustomize print), also
// for strings that need quoting.
func TestMarshalObjectMatchesSigsYAML(t *testing.T) {
	strs := []string{"", "1", "20", "1.5", "1e3", "0x1F", "0o17", "true", "yes", "on", "no", "Off", "null", "~", "*", "a: b", "- x",
		"#x", "x #y", " lead", "trail ", "2001-12-14", "12:30", "é ü", "line\nbreak", "tab\there", "<b>&</b>", "'q'", `"dq"`,
		"250m", "2Gi", "10.0.0.0/8", "2001:db8::/32", "api.anthropic.com", "arn:aws:iam::1:role/x", "k8s:io.kubernetes.pod.namespace"}
	for _, s := range strs {
		obj := map[string]any{
			"metadata": map[string]any{"name": s, "labels": map[string]any{s: s, "b": "c", "a": "d"}},
			"list":     []any{s, int64(53), map[string]any{"k": s, "n": int64(-1)}, []any{}, map[string]any{}},
			"flag":     true,
			"float":    1.25,
		}
		want, err := yaml.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		got, err := marshalObject(obj)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(string(want), string(got)); diff != "" {
			t.Errorf("string %q (-sigs.k8s.io/yaml +direct):\n%s", s, diff)
		}
	}
}
