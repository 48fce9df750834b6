package hookapi

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestChunkLinesWholeCharacters: an output chunk that ends inside a UTF-8
// character is written without it; the character goes with the next chunk
// (or the flush), so that joined lines are the output exactly.
func TestChunkLinesWholeCharacters(t *testing.T) {
	for _, tc := range []struct {
		name   string
		chunks []string
		want   []string
	}{
		{"ascii", []string{"ab", "c\n"}, []string{"ab", "c\n"}},
		{"a 2-byte character cut", []string{"x\xc3", "\xa9y"}, []string{"x", "éy"}},
		{"a 4-byte character cut twice", []string{"\xf0\x9f", "\x98", "\x80!"}, []string{"😀!"}},
		{"a cut character at the end is flushed as it is", []string{"ok\xe2\x82"}, []string{"ok", "\xe2\x82"}},
		{"invalid bytes are not held", []string{"a\xff", "b"}, []string{"a\xff", "b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			w := &chunkLines{stream: "stdout", line: func(l ExecuteLine) error {
				got = append(got, l.Stdout)
				return nil
			}}
			for _, c := range tc.chunks {
				if n, err := w.Write([]byte(c)); err != nil || n != len(c) {
					t.Fatalf("Write(%q) = %d, %v", c, n, err)
				}
			}
			if err := w.flush(); err != nil {
				t.Fatal(err)
			}
			// The JSON line of a flushed cut character is U+FFFD, as
			// the whole output's would have been.
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("lines (-want +got):\n%s", diff)
			}
		})
	}
}
