package main

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestVersionFlag: pcsync --version prints what pcsync version prints, and
// -v is not taken (kubectl's users know it as a log level).
func TestVersionFlag(t *testing.T) {
	tests := []struct {
		args       []string
		wantCode   int
		wantStdout string
		wantStderr string
	}{
		{[]string{"version"}, 0, versionLine() + "\n", ""},
		{[]string{"--version"}, 0, versionLine() + "\n", ""},
		{[]string{"-v"}, 2, "", "unknown shorthand flag: 'v'"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			code, stdout, stderr := pcsync(t, tt.args...)
			if code != tt.wantCode || !strings.Contains(stderr, tt.wantStderr) {
				t.Errorf("exit %d, want %d and stderr with %q; stderr:\n%s", code, tt.wantCode, tt.wantStderr, stderr)
			}
			if diff := cmp.Diff(tt.wantStdout, stdout); diff != "" {
				t.Errorf("stdout (-want +got):\n%s", diff)
			}
		})
	}
}
