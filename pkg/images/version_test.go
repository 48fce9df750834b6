package images

import (
	"os/exec"
	"strings"
	"testing"
)

// TestMakeVersion: make's TAG, which make build stamps into pcsync and
// make images tags the images with, is Version unless TAG is given.
func TestMakeVersion(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("no make")
	}
	cmd := exec.Command("make", "-s", "-C", "../..", "version")
	for _, kv := range cmd.Environ() {
		if !strings.HasPrefix(kv, "TAG=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("make -s version: %v", err)
	}
	if got := strings.TrimSpace(string(out)); got != Version {
		t.Errorf("make -s version = %q, want %q", got, Version)
	}
}
