package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// paperclipConfig writes a config whose company acme opts in, with
// Paperclip at url (a port nothing listens on: Paperclip down).
func paperclipConfig(t *testing.T, url string) string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		"settings.yaml": "apiVersion: pcsync.io/v1alpha1\nkind: Settings\nmetadata: {name: fleet}\nspec:\n" +
			"  paperclip: {url: \"" + url + "\", spoolDir: /spool, tokenEnv: TEST_PCSYNC_BOARD_KEY}\n",
		"acme.yaml": "apiVersion: pcsync.io/v1alpha1\nkind: Company\nmetadata: {name: acme}\nspec:\n  id: acme-id\n" +
			"  paperclip: {manage: true}\n  agents:\n    - {name: coder, adapter: claude_local, paperclip: {role: engineer}}\n",
	}
	for n, b := range files {
		if err := os.WriteFile(filepath.Join(dir, n), []byte(b), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestPaperclipOnlyNeedsNoCluster: --kubernetes=false never reaches the
// cluster; Paperclip down is an error naming the company, exit code 2, and
// the board key shows nowhere.
func TestPaperclipOnlyNeedsNoCluster(t *testing.T) {
	const secret = "pcp_board_fedcba9876543210"
	t.Setenv("TEST_PCSYNC_BOARD_KEY", secret)
	kubeconfig, requests := recordingServer(t)
	dir := paperclipConfig(t, "http://127.0.0.1:1")
	for _, tc := range []struct {
		name   string
		args   []string
		isDiff bool
	}{
		{"apply", []string{"--kubernetes=false", dir}, false},
		{"apply json", []string{"--kubernetes=false", "-o", "json", dir}, false},
		{"diff", []string{"--kubernetes=false", dir}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			newCmd := newApplyCmd
			if tc.isDiff {
				newCmd = newDiffCmd
			}
			code, stdout, stderr := runCmd(t, newCmd, kubeconfig, tc.args...)
			if code != 2 {
				t.Errorf("exit code %d, want 2; stdout:\n%s\nstderr:\n%s", code, stdout, stderr)
			}
			if !strings.Contains(stderr, "paperclip company acme (id acme-id): list agents failed") || !strings.Contains(stderr, "unreachable") {
				t.Errorf("stderr does not name the company and the failure:\n%s", stderr)
			}
			if strings.Contains(stdout+stderr, secret) {
				t.Errorf("the board key shows:\n%s\n%s", stdout, stderr)
			}
		})
	}
	if n := requests.Load(); n != 0 {
		t.Errorf("%d requests reached the cluster", n)
	}
	if code, _, _ := runCmd(t, newApplyCmd, kubeconfig, "--kubernetes=false", "--paperclip=false", dir); code != 2 {
		t.Errorf("both sides off: exit code %d, want 2", code)
	}
}
