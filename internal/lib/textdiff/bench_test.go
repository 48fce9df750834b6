package textdiff

import (
	"fmt"
	"strings"
	"testing"
)

// yamlLines is n lines shaped like a ConfigMap's data; gen changes the values.
func yamlLines(n, gen int) string {
	var sb strings.Builder
	for i := range n {
		fmt.Fprintf(&sb, "  key-%05d: value-%d-%d\n", i, i, gen)
	}
	return sb.String()
}

// BenchmarkUnified diffs texts of n lines where every line changed (a rewrite, the
// worst case for the edit search) and where one line in 100 changed. Run with
// -benchmem: B/op is the memory one diff takes.
func BenchmarkUnified(b *testing.B) {
	for _, n := range []int{500, 1000, 2000, 5000} {
		from := yamlLines(n, 0)
		rewrite := yamlLines(n, 1)
		lines := strings.SplitAfter(from, "\n")
		for i := 0; i < len(lines); i += 100 {
			lines[i] = strings.Replace(lines[i], "value", "VALUE", 1)
		}
		sparse := strings.Join(lines, "")
		for _, c := range []struct {
			name string
			to   string
		}{{"rewrite", rewrite}, {"every100th", sparse}} {
			b.Run(fmt.Sprintf("lines=%d/%s", n, c.name), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if Unified("live", "merged", from, c.to, 3) == "" {
						b.Fatal("no diff")
					}
				}
			})
		}
	}
}
