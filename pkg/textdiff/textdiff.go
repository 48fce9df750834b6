// Package textdiff computes line diffs with Myers' O(ND) algorithm and formats them as
// unified diffs, the format of `diff -u` and `git diff`.
package textdiff

import (
	"fmt"
	"strings"
)

// OpKind says what happens to one line in an edit script.
type OpKind int

const (
	// Equal lines are in both texts.
	Equal OpKind = iota
	// Delete lines are only in the old text.
	Delete
	// Insert lines are only in the new text.
	Insert
)

// Op is one line of an edit script.
type Op struct {
	// Kind says whether the line is kept, deleted or inserted.
	Kind OpKind
	// Line is the text of the line, without its line break.
	Line string
}

// SplitLines splits s into lines without their "\n". It reports whether the last line
// ended with a line break. An empty string has no lines.
func SplitLines(s string) (lines []string, finalNewline bool) {
	if s == "" {
		return nil, true
	}
	finalNewline = strings.HasSuffix(s, "\n")
	s = strings.TrimSuffix(s, "\n")
	return strings.Split(s, "\n"), finalNewline
}

// Lines returns a shortest edit script that turns a into b.
func Lines(a, b []string) []Op {
	// Common prefix and suffix cost nothing and shrink the search.
	pre := 0
	for pre < len(a) && pre < len(b) && a[pre] == b[pre] {
		pre++
	}
	suf := 0
	for suf < len(a)-pre && suf < len(b)-pre && a[len(a)-1-suf] == b[len(b)-1-suf] {
		suf++
	}
	ops := make([]Op, 0, len(a)+len(b))
	for _, l := range a[:pre] {
		ops = append(ops, Op{Equal, l})
	}
	ops = append(ops, myers(a[pre:len(a)-suf], b[pre:len(b)-suf])...)
	for _, l := range a[len(a)-suf:] {
		ops = append(ops, Op{Equal, l})
	}
	return ops
}

// myers is the greedy forward algorithm of "An O(ND) Difference Algorithm and Its
// Variations" (Myers 1986), keeping each round's furthest-reaching paths so that the
// script can be traced back.
func myers(a, b []string) []Op {
	n, m := len(a), len(b)
	if n == 0 || m == 0 {
		ops := make([]Op, 0, n+m)
		for _, l := range a {
			ops = append(ops, Op{Delete, l})
		}
		for _, l := range b {
			ops = append(ops, Op{Insert, l})
		}
		return ops
	}
	maxD := n + m
	off := maxD + 1
	v := make([]int, 2*maxD+3)
	var trace [][]int
	found := false
	for d := 0; d <= maxD && !found; d++ {
		snapshot := make([]int, len(v))
		copy(snapshot, v)
		trace = append(trace, snapshot)
		for k := -d; k <= d; k += 2 {
			var x int
			if k == -d || (k != d && v[off+k-1] < v[off+k+1]) {
				x = v[off+k+1] // step down: insertion
			} else {
				x = v[off+k-1] + 1 // step right: deletion
			}
			y := x - k
			for x < n && y < m && a[x] == b[y] {
				x++
				y++
			}
			v[off+k] = x
			if x >= n && y >= m {
				found = true
				break
			}
		}
	}
	// Trace back from (n, m) through the saved rounds.
	var rev []Op
	x, y := n, m
	for d := len(trace) - 1; d >= 0; d-- {
		vd := trace[d] // the state before round d
		k := x - y
		var prevK int
		if d == 0 {
			prevK = 0
		} else if k == -d || (k != d && vd[off+k-1] < vd[off+k+1]) {
			prevK = k + 1
		} else {
			prevK = k - 1
		}
		prevX := 0
		if d > 0 {
			prevX = vd[off+prevK]
		}
		prevY := prevX - prevK
		for x > prevX && y > prevY {
			x--
			y--
			rev = append(rev, Op{Equal, a[x]})
		}
		if d == 0 {
			break
		}
		if x == prevX {
			y--
			rev = append(rev, Op{Insert, b[y]})
		} else {
			x--
			rev = append(rev, Op{Delete, a[x]})
		}
		x, y = prevX, prevY
	}
	for i, j := 0, len(rev)-1; i < j; i, j = i+1, j-1 {
		rev[i], rev[j] = rev[j], rev[i]
	}
	return rev
}

// Unified returns the unified diff of two texts with the given number of context
// lines (3 is diff's default), headed by "--- fromName" and "+++ toName". It returns
// the empty string when the texts are equal.
func Unified(fromName, toName, from, to string, context int) string {
	if from == to {
		return ""
	}
	if context < 0 {
		context = 0
	}
	a, aNL := SplitLines(from)
	b, bNL := SplitLines(to)
	ops := Lines(a, b)
	// A missing final newline makes the last line differ, as in diff(1).
	if !aNL || !bNL {
		ops = markFinalNewline(ops, len(a), len(b), aNL, bNL)
	}

	var sb strings.Builder
	fmt.Fprintf(&sb, "--- %s\n+++ %s\n", fromName, toName)
	for _, h := range hunks(ops, context) {
		writeHunk(&sb, ops, h)
	}
	return sb.String()
}

const noNewline = "\\ No newline at end of file"

// hunk is the range ops[start:end] of an edit script printed as one hunk.
type hunk struct{ start, end int }

// markFinalNewline makes the last line of a text that lacks a final newline differ
// from an identical line that has one, by turning an Equal last line into a
// Delete+Insert pair and tagging the lines without a newline.
func markFinalNewline(ops []Op, na, nb int, aNL, bNL bool) []Op {
	out := make([]Op, 0, len(ops)+2)
	ai, bi := 0, 0
	for _, op := range ops {
		lastA := op.Kind != Insert && ai == na-1
		lastB := op.Kind != Delete && bi == nb-1
		switch op.Kind {
		case Equal:
			if (lastA && !aNL) != (lastB && !bNL) {
				d := Op{Delete, op.Line}
				i := Op{Insert, op.Line}
				if lastA && !aNL {
					d.Line += "\x00"
				}
				if lastB && !bNL {
					i.Line += "\x00"
				}
				out = append(out, d, i)
			} else {
				if lastA && !aNL {
					op.Line += "\x00"
				}
				out = append(out, op)
			}
			ai++
			bi++
		case Delete:
			if lastA && !aNL {
				op.Line += "\x00"
			}
			out = append(out, op)
			ai++
		case Insert:
			if lastB && !bNL {
				op.Line += "\x00"
			}
			out = append(out, op)
			bi++
		}
	}
	// Deletes before inserts inside each change block, as diff prints them.
	for i := 0; i < len(out); {
		if out[i].Kind == Equal {
			i++
			continue
		}
		j := i
		for j < len(out) && out[j].Kind != Equal {
			j++
		}
		var dels, ins []Op
		for _, op := range out[i:j] {
			if op.Kind == Delete {
				dels = append(dels, op)
			} else {
				ins = append(ins, op)
			}
		}
		copy(out[i:], append(dels, ins...))
		i = j
	}
	return out
}

// hunks groups the changes of ops with their context lines; changes closer than
// 2*context lines share a hunk.
func hunks(ops []Op, context int) []hunk {
	var hs []hunk
	i := 0
	for i < len(ops) {
		if ops[i].Kind == Equal {
			i++
			continue
		}
		start := max(i-context, 0)
		end := i
		for end < len(ops) {
			if ops[end].Kind != Equal {
				end++
				continue
			}
			run := end
			for run < len(ops) && ops[run].Kind == Equal {
				run++
			}
			if run == len(ops) || run-end > 2*context {
				end = min(end+context, len(ops))
				break
			}
			end = run
		}
		if len(hs) > 0 && start <= hs[len(hs)-1].end {
			hs[len(hs)-1].end = end
		} else {
			hs = append(hs, hunk{start, end})
		}
		i = end
	}
	return hs
}

func writeHunk(sb *strings.Builder, ops []Op, h hunk) {
	// Line numbers (1-based) of the hunk's first line in each text.
	aLine, bLine := 1, 1
	for _, op := range ops[:h.start] {
		if op.Kind != Insert {
			aLine++
		}
		if op.Kind != Delete {
			bLine++
		}
	}
	aCount, bCount := 0, 0
	for _, op := range ops[h.start:h.end] {
		if op.Kind != Insert {
			aCount++
		}
		if op.Kind != Delete {
			bCount++
		}
	}
	fmt.Fprintf(sb, "@@ -%s +%s @@\n", hunkRange(aLine, aCount), hunkRange(bLine, bCount))
	for _, op := range ops[h.start:h.end] {
		prefix := " "
		switch op.Kind {
		case Delete:
			prefix = "-"
		case Insert:
			prefix = "+"
		}
		line, tagged := strings.CutSuffix(op.Line, "\x00")
		sb.WriteString(prefix)
		sb.WriteString(line)
		sb.WriteByte('\n')
		if tagged {
			sb.WriteString(noNewline)
			sb.WriteByte('\n')
		}
	}
}

// hunkRange formats one side of a hunk header the way GNU diff does: "l" for one line,
// "l,n" otherwise, and for an empty range the line before it.
func hunkRange(line, count int) string {
	switch count {
	case 0:
		return fmt.Sprintf("%d,0", line-1)
	case 1:
		return fmt.Sprintf("%d", line)
	default:
		return fmt.Sprintf("%d,%d", line, count)
	}
}
