package config

import (
	"fmt"
	"strings"
	"testing"
)

// TestRepeatedKeyLongMapping checks that a repeated key is found in a
// mapping longer than keySet keeps in its list, before and after it
// switches to its map, and that merged keys give way to written ones.
func TestRepeatedKeyLongMapping(t *testing.T) {
	for _, dup := range []int{3, keySetListMax + 3} {
		var b strings.Builder
		for i := range keySetListMax + 5 {
			fmt.Fprintf(&b, "k%d: %d\n", i, i)
		}
		fmt.Fprintf(&b, "k%d: again\n", dup)
		_, err := parseYAML("x.yaml", []byte(b.String()), parseLimits{maxNodes: 1000})
		want := fmt.Sprintf("x.yaml:%d:1: key \"k%d\" repeated (first at line %d)", keySetListMax+6, dup, dup+1)
		if err == nil || err.Error() != want {
			t.Errorf("duplicate k%d: got %v, want %s", dup, err, want)
		}
	}
	var b strings.Builder
	b.WriteString("base: &base\n")
	for i := range keySetListMax + 5 {
		fmt.Fprintf(&b, "  k%d: base\n", i)
	}
	b.WriteString("top:\n  <<: *base\n")
	for i := range keySetListMax + 2 {
		fmt.Fprintf(&b, "  k%d: own\n", i)
	}
	docs, err := parseYAML("y.yaml", []byte(b.String()), parseLimits{maxNodes: 1000})
	if err != nil {
		t.Fatal(err)
	}
	for i := range keySetListMax + 5 {
		want := "own"
		if i >= keySetListMax+2 {
			want = "base"
		}
		if got, _ := docs[0].stringAt(keys("top", fmt.Sprintf("k%d", i))); got != want {
			t.Errorf("top.k%d = %q, want %q", i, got, want)
		}
	}
}
