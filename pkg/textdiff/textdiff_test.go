package textdiff

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestUnified(t *testing.T) {
	tests := []struct {
		name     string
		from, to string
		want     string
	}{
		{name: "equal", from: "a\nb\n", to: "a\nb\n", want: ""},
		{name: "create", from: "", to: "a\nb\n", want: "--- old\n+++ new\n@@ -0,0 +1,2 @@\n+a\n+b\n"},
		{name: "delete all", from: "a\n", to: "", want: "--- old\n+++ new\n@@ -1 +0,0 @@\n-a\n"},
		{name: "change in the middle",
			from: "1\n2\n3\n4\n5\n6\n7\n8\n9\n",
			to:   "1\n2\n3\n4\nfive\n6\n7\n8\n9\n",
			want: "--- old\n+++ new\n@@ -2,7 +2,7 @@\n 2\n 3\n 4\n-5\n+five\n 6\n 7\n 8\n"},
		{name: "two hunks",
			from: "a\n1\n2\n3\n4\n5\n6\n7\n8\nz\n",
			to:   "A\n1\n2\n3\n4\n5\n6\n7\n8\nZ\n",
			want: "--- old\n+++ new\n@@ -1,4 +1,4 @@\n-a\n+A\n 1\n 2\n 3\n@@ -7,4 +7,4 @@\n 6\n 7\n 8\n-z\n+Z\n"},
		{name: "close changes share a hunk",
			from: "a\n1\n2\n3\nz\n",
			to:   "A\n1\n2\n3\nZ\n",
			want: "--- old\n+++ new\n@@ -1,5 +1,5 @@\n-a\n+A\n 1\n 2\n 3\n-z\n+Z\n"},
		{name: "no newline at end",
			from: "a\nb",
			to:   "a\nb\n",
			want: "--- old\n+++ new\n@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+b\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Unified("old", "new", tt.from, tt.to, 3)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Unified mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// lcs is the textbook dynamic-programming longest common subsequence length.
func lcs(a, b []string) int {
	dp := make([][]int, len(a)+1)
	for i := range dp {
		dp[i] = make([]int, len(b)+1)
	}
	for i := len(a) - 1; i >= 0; i-- {
		for j := len(b) - 1; j >= 0; j-- {
			if a[i] == b[j] {
				dp[i][j] = dp[i+1][j+1] + 1
			} else {
				dp[i][j] = max(dp[i+1][j], dp[i][j+1])
			}
		}
	}
	return dp[0][0]
}

func TestLinesIsShortestAndCorrect(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	alphabet := []string{"a", "b", "c", "d"}
	gen := func() []string {
		n := r.IntN(12)
		s := make([]string, n)
		for i := range s {
			s[i] = alphabet[r.IntN(len(alphabet))]
		}
		return s
	}
	for i := 0; i < 3000; i++ {
		a, b := gen(), gen()
		ops := Lines(a, b)
		var gotA, gotB []string
		edits := 0
		for _, op := range ops {
			if op.Kind != Insert {
				gotA = append(gotA, op.Line)
			}
			if op.Kind != Delete {
				gotB = append(gotB, op.Line)
			}
			if op.Kind != Equal {
				edits++
			}
		}
		if strings.Join(gotA, ",") != strings.Join(a, ",") || strings.Join(gotB, ",") != strings.Join(b, ",") {
			t.Fatalf("script for %q -> %q does not reproduce the texts: %v", a, b, ops)
		}
		if want := len(a) + len(b) - 2*lcs(a, b); edits != want {
			t.Fatalf("script for %q -> %q has %d edits, shortest has %d", a, b, edits, want)
		}
	}
}
