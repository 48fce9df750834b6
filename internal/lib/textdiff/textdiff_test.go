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
		context  *int // default 3
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
		{name: "insert without context", from: "1\n2\n3\n", to: "1\n2\nx\n3\n", context: new(int),
			want: "--- old\n+++ new\n@@ -2,0 +3 @@\n+x\n"},
		{name: "delete without context", from: "1\n2\n3\n", to: "1\n3\n", context: new(int),
			want: "--- old\n+++ new\n@@ -2 +1,0 @@\n-2\n"},
		{name: "no newline at end",
			from: "a\nb",
			to:   "a\nb\n",
			want: "--- old\n+++ new\n@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+b\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			context := 3
			if tt.context != nil {
				context = *tt.context
			}
			got := Unified("old", "new", tt.from, tt.to, context)
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

// sides rebuilds both texts from a diff with context enough for one hunk holding
// every line, and counts its changed lines.
func sides(t *testing.T, diff string) (from, to string, edits int) {
	t.Helper()
	lines := strings.SplitAfter(diff, "\n")
	if len(lines) < 3 || !strings.HasPrefix(lines[2], "@@ ") {
		t.Fatalf("not one hunk:\n%s", diff)
	}
	var a, b strings.Builder
	var last *strings.Builder // the side(s) the previous line went to
	var lastBoth bool
	for _, l := range lines[3:] {
		if l == "" {
			continue
		}
		if l == noNewline {
			trim := func(sb *strings.Builder) {
				s := strings.TrimSuffix(sb.String(), "\n")
				sb.Reset()
				sb.WriteString(s)
			}
			trim(last)
			if lastBoth {
				trim(&b)
			}
			continue
		}
		switch l[0] {
		case ' ':
			a.WriteString(l[1:])
			b.WriteString(l[1:])
			last, lastBoth = &a, true
		case '-':
			a.WriteString(l[1:])
			last, lastBoth = &a, false
			edits++
		case '+':
			b.WriteString(l[1:])
			last, lastBoth = &b, false
			edits++
		default:
			t.Fatalf("unexpected line %q in:\n%s", l, diff)
		}
	}
	return a.String(), b.String(), edits
}

// TestUnifiedIsCorrectAndShortest checks on random texts that the diff turns one
// text into the other and, for changes this small, changes as few lines as possible.
func TestUnifiedIsCorrectAndShortest(t *testing.T) {
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
	text := func(lines []string, nl bool) string {
		s := strings.Join(lines, "\n")
		if nl && len(lines) > 0 {
			s += "\n"
		}
		return s
	}
	for i := 0; i < 3000; i++ {
		a, b := gen(), gen()
		aNL, bNL := r.IntN(8) > 0, r.IntN(8) > 0
		from, to := text(a, aNL), text(b, bNL)
		diff := Unified("a", "b", from, to, 100)
		if from == to {
			if diff != "" {
				t.Fatalf("equal texts %q give a diff:\n%s", from, diff)
			}
			continue
		}
		gotA, gotB, edits := sides(t, diff)
		if gotA != from || gotB != to {
			t.Fatalf("diff of %q -> %q gives %q -> %q:\n%s", from, to, gotA, gotB, diff)
		}
		if aNL && bNL {
			if want := len(a) + len(b) - 2*lcs(a, b); edits != want {
				t.Fatalf("diff of %q -> %q changes %d lines, the shortest %d:\n%s", a, b, edits, want, diff)
			}
		}
	}
}
