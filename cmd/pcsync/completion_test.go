package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestCompletion: the shell's completion (cobra's __complete, which every
// shell script calls) offers each flag's values, directories where one is
// wanted, the kubeconfig's contexts and the spool's run names.
func TestCompletion(t *testing.T) {
	spoolDir := t.TempDir()
	for _, name := range []string{"fix-bug.yaml", "review.json"} {
		req := "apiVersion: pcsync.io/v1alpha1\nkind: Run\ncompany: acme\nagent: coder\nprompt: hi\n"
		if err := os.WriteFile(filepath.Join(spoolDir, name), []byte(req), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	kc := "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\nusers: [{name: u, user: {}}]\n" +
		"contexts: [{name: prod, context: {cluster: c, user: u}}, {name: dev, context: {cluster: c, user: u}}]\ncurrent-context: dev\n"
	if err := os.WriteFile(kubeconfig, []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}
	const noFiles, dirs = ":4", ":16"
	tests := []struct {
		args []string
		want []string
	}{
		{[]string{"render", "-o", ""}, []string{"yaml", "json", noFiles}},
		{[]string{"diff", "--output", ""}, []string{"text", "json", noFiles}},
		{[]string{"apply", "-o", ""}, []string{"text", "json", noFiles}},
		{[]string{"runs", "list", "-o", ""}, []string{"table", "json", noFiles}},
		{[]string{"doctor", "-o", ""}, []string{"table", "json", noFiles}},
		{[]string{"schema", "-o", ""}, []string{"json", noFiles}},
		{[]string{"schema", "--kind", ""}, []string{"config", "run", noFiles}},
		{[]string{"validate", "--log-format", ""}, []string{"text", "json", noFiles}},
		{[]string{"--log-level", ""}, []string{"debug", "info", "warn", "error", noFiles}},
		{[]string{"daemon", "--executor", ""}, []string{"kubernetes", "local", noFiles}},
		{[]string{"daemon", "--sandbox-exec-protocol", ""}, []string{"auto", "websocket", "spdy", noFiles}},
		{[]string{"daemon", "--spool", ""}, []string{dirs}},
		{[]string{"runs", "list", "--state-dir", ""}, []string{dirs}},
		{[]string{"render", "--output-dir", ""}, []string{dirs}},
		{[]string{"render", ""}, []string{dirs}},
		{[]string{"apply", "config", ""}, []string{noFiles}},
		{[]string{"--kubeconfig", kubeconfig, "diff", "--context", ""}, []string{"dev", "prod", noFiles}},
		{[]string{"runs", "show", "--spool", spoolDir, ""}, []string{"fix-bug", "review", noFiles}},
		{[]string{"runs", "show", "--spool", spoolDir, "r"}, []string{"review", noFiles}},
		{[]string{"runs", "show", "--spool", filepath.Join(spoolDir, "missing"), ""}, []string{noFiles}},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			code, stdout, stderr := pcsync(t, append([]string{"__complete"}, tt.args...)...)
			if code != 0 {
				t.Fatalf("exit %d\n%s", code, stderr)
			}
			if diff := cmp.Diff(tt.want, strings.Split(strings.TrimSpace(stdout), "\n")); diff != "" {
				t.Errorf("completions (-want +got):\n%s", diff)
			}
		})
	}
}

// TestCompletedExecutorsAccepted: every --executor value completion offers
// is one the daemon takes (it checks --executor first, then refuses
// --no-reconcile --no-runs for leaving nothing to do).
func TestCompletedExecutorsAccepted(t *testing.T) {
	for _, executor := range flagValues["executor"]() {
		code, _, stderr := pcsync(t, "daemon", t.TempDir(), "--executor", executor, "--no-reconcile", "--no-runs")
		if code != 2 || !strings.Contains(stderr, "leave nothing to do") {
			t.Errorf("--executor %s: exit %d, want 2 for nothing to do, not the executor; stderr:\n%s", executor, code, stderr)
		}
	}
}
