package redact

import (
	"bytes"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const secret = "s3cr3t-value-of-the-agent"

func TestString(t *testing.T) {
	r := New(secret, "short", "  "+secret+"-longer  ")
	tests := []struct{ in, want string }{
		{"key " + secret + " end", "key " + Marker + " end"},
		{"key " + secret + "-longer", "key " + Marker},
		{"short stays", "short stays"},
		{"Authorization: Bearer pc1-abc123def", "Authorization: Bearer " + Marker},
		{`"authorization":"token zzz999yyy"`, `"authorization":"token ` + Marker + `"`},
		{"curl -H 'Authorization: Basic dXNlcjpwYXNz1'", "curl -H 'Authorization: Basic " + Marker + "'"},
		{"bearer or basic authentication", "bearer or basic authentication"},
		{"jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.sflKxwRJSMeKKF2QT4", "jwt " + Marker},
	}
	for _, tt := range tests {
		if got := r.String(tt.in); got != tt.want {
			t.Errorf("String(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestLineWriterSecretSplitAcrossWrites: the log is a stream; a secret cut
// in two by the writes (the reads of the agent's output) is still masked.
func TestLineWriterSecretSplitAcrossWrites(t *testing.T) {
	line := "the key is " + secret + " and more\nsecond " + secret + "\npartial " + secret[:5]
	for cut := 1; cut < len(line); cut++ {
		var out bytes.Buffer
		lw := NewLineWriter(&out, New(secret), 0)
		for _, part := range []string{line[:cut], line[cut:]} {
			if _, err := lw.Write([]byte(part)); err != nil {
				t.Fatal(err)
			}
		}
		if err := lw.Flush(); err != nil {
			t.Fatal(err)
		}
		want := "the key is " + Marker + " and more\nsecond " + Marker + "\npartial " + secret[:5]
		if diff := cmp.Diff(want, out.String()); diff != "" {
			t.Fatalf("cut at %d (-want +got):\n%s", cut, diff)
		}
	}
}

// TestLineWriterBound: a line longer than the bound is written in parts,
// and a secret across a part boundary is still masked.
func TestLineWriterBound(t *testing.T) {
	var out bytes.Buffer
	lw := NewLineWriter(&out, New(secret), 64)
	long := strings.Repeat("x", 50) + secret + strings.Repeat("y", 50) + secret + "\n"
	for i := 0; i < len(long); i += 7 {
		if _, err := lw.Write([]byte(long[i:min(i+7, len(long))])); err != nil {
			t.Fatal(err)
		}
		if lw.Pending() > 64+7 {
			t.Fatalf("holds %d bytes back, bound 64", lw.Pending())
		}
	}
	want := strings.Repeat("x", 50) + Marker + strings.Repeat("y", 50) + Marker + "\n"
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
