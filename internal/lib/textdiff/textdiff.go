// Package textdiff formats line diffs as unified diffs, the format of `diff -u` and
// `git diff`. The edit script comes from github.com/aymanbagabas/go-udiff (a copy of
// the Go tools' internal diff package), whose search is bounded: memory grows with the
// texts, not with the square of the number of changes, and a very large change may get
// a valid but not the shortest script.
package textdiff

import (
	"fmt"
	"strings"

	"github.com/aymanbagabas/go-udiff"
)

// Unified returns the unified diff of two texts with the given number of context
// lines (3 is diff's default, less than 0 means 0), headed by "--- fromName" and
// "+++ toName". It returns the empty string when the texts are equal. A missing final
// newline is marked "\ No newline at end of file", and hunk headers follow GNU diff
// ("l" for one line, "l,0" after line l for none).
func Unified(fromName, toName, from, to string, context int) string {
	if from == to {
		return ""
	}
	u, err := udiff.ToUnifiedDiff(fromName, toName, from, udiff.Lines(from, to), max(context, 0))
	if err != nil {
		// udiff.Lines gives edits consistent with from; say so if it ever does not.
		panic(fmt.Sprintf("textdiff: the diff library's edits do not fit the text: %v", err))
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "--- %s\n+++ %s\n", fromName, toName)
	for _, h := range u.Hunks {
		writeHunk(&sb, h)
	}
	return sb.String()
}

const noNewline = "\\ No newline at end of file\n"

func writeHunk(sb *strings.Builder, h *udiff.Hunk) {
	aCount, bCount := 0, 0
	for _, l := range h.Lines {
		if l.Kind != udiff.Insert {
			aCount++
		}
		if l.Kind != udiff.Delete {
			bCount++
		}
	}
	fmt.Fprintf(sb, "@@ -%s +%s @@\n", hunkRange(h.FromLine, aCount), hunkRange(h.ToLine, bCount))
	for _, l := range h.Lines {
		switch l.Kind {
		case udiff.Delete:
			sb.WriteByte('-')
		case udiff.Insert:
			sb.WriteByte('+')
		default:
			sb.WriteByte(' ')
		}
		sb.WriteString(l.Content)
		if !strings.HasSuffix(l.Content, "\n") {
			sb.WriteString("\n" + noNewline)
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
