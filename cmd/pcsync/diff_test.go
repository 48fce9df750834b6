package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestDiffExitCodes: diff exits as kubectl diff does, 0 for no differences
// and 2 or more for every error, an invalid config included, so that 1
// always means differences (TestReferencePathsSameDiff, an integration
// test, sees 1 and 0 against a cluster).
func TestDiffExitCodes(t *testing.T) {
	kubeconfig, _ := recordingServer(t)
	good := filepath.Join("..", "..", "testdata", "render", "minimal", "config")
	bad := filepath.Join("..", "..", "testdata", "badconfig", "many-errors")
	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantStderr string
	}{
		{"nothing to compare", []string{"--kubernetes=false", good}, 0, ""},
		{"invalid config", []string{bad}, 2, "pcsync: invalid config:"},
		{"invalid config, no cluster", []string{"--kubernetes=false", bad}, 2, "pcsync: invalid config:"},
		{"cluster error", []string{good}, 2, "not a real API server"},
		{"usage error", []string{"-o", "yaml", good}, 2, `--output "yaml": want text or json`},
		{"no such directory", []string{filepath.Join(t.TempDir(), "nope")}, 2, "config directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := pcsync(t, append([]string{"diff", "--kubeconfig", kubeconfig}, tt.args...)...)
			if code != tt.wantCode || !strings.Contains(stderr, tt.wantStderr) {
				t.Errorf("exit code %d, want %d and stderr with %q; stderr:\n%s", code, tt.wantCode, tt.wantStderr, stderr)
			}
		})
	}
}
