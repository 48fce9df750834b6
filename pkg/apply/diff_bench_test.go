package apply

import (
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/pcsync/pcsync/internal/lib/textdiff"
)

// configMap returns a ConfigMap whose data is n keys (one YAML line each); gen
// changes every value, and every100 changes one value in 100.
func configMap(n, gen int, every100 bool) *unstructured.Unstructured {
	data := make(map[string]any, n)
	for i := range n {
		v := fmt.Sprintf("value-%d", i)
		if (!every100 && gen > 0) || (every100 && i%100 == 0) {
			v = fmt.Sprintf("value-%d-%d", i, gen)
		}
		data[fmt.Sprintf("key-%05d", i)] = v
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "big", "namespace": "acme", "resourceVersion": "7"},
		"data":     data,
	}}
}

// BenchmarkObjectDiff is what `pcsync diff` does in memory for one ConfigMap of
// 5,000 data lines once the live and the dry-run objects are read: both as YAML,
// then the unified diff. Run with -benchmem: B/op is the memory one object takes.
func BenchmarkObjectDiff(b *testing.B) {
	live := configMap(5000, 0, false)
	for _, c := range []struct {
		name   string
		merged *unstructured.Unstructured
	}{
		{"lines=5000/rewrite", configMap(5000, 1, false)},
		{"lines=5000/every100th", configMap(5000, 1, true)},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			ref := ObjectRef{Version: "v1", Kind: "ConfigMap", Namespace: "acme", Name: "big"}
			for b.Loop() {
				from, to, err := maskedTexts(live, c.merged)
				if err != nil {
					b.Fatal(err)
				}
				if textdiff.Unified(diffHeader("live", ref), diffHeader("merged", ref), from, to, 3) == "" {
					b.Fatal("no diff")
				}
			}
		})
	}
}
