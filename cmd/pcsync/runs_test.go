package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pcsync/pcsync/pkg/result"
	"github.com/pcsync/pcsync/pkg/runs/spool"
)

// These tests need no agent: a rejected request is a whole run of the
// daemon (the local executor only starts processes for valid ones).

func pcsync(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

func TestDaemonOnceRejectsAndRunsListShows(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "bad.yaml"),
		[]byte("apiVersion: pcsync.io/v1alpha1\nkind: Run\ncompany: nobody\nagent: coder\nprompt: hi\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := pcsync(t, "daemon", "../../examples/demo", "--spool", dir, "--executor", "local", "--once", "--log-level", "warn")
	if code != 0 {
		t.Fatalf("daemon --once: exit %d\n%s", code, stderr)
	}
	r, err := result.Read(filepath.Join(dir, "bad.result.json"))
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != result.StatusRejected || !strings.Contains(*r.ErrorMessage, `company "nobody" is not in the config`) {
		t.Errorf("result: %s %v", r.Status, *r.ErrorMessage)
	}

	code, stdout, stderr := pcsync(t, "runs", "list", "--spool", dir)
	if code != 0 {
		t.Fatalf("runs list: exit %d\n%s", code, stderr)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "NAME") || !strings.Contains(lines[1], "rejected") || !strings.Contains(lines[1], "invalid_request") ||
		!strings.HasPrefix(lines[2], "daemon: not running: stopped ") {
		t.Errorf("runs list:\n%s", stdout)
	}

	code, stdout, stderr = pcsync(t, "runs", "show", "bad", "--spool", dir, "-o", "json")
	if code != 0 {
		t.Fatalf("runs show: exit %d\n%s", code, stderr)
	}
	var info spool.RunInfo
	if err := json.Unmarshal([]byte(stdout), &info); err != nil {
		t.Fatalf("runs show -o json: %v\n%s", err, stdout)
	}
	if info.Status != "rejected" || info.Result == nil || info.File != "bad.yaml" {
		t.Errorf("runs show: %+v", info)
	}
	code, stdout, _ = pcsync(t, "runs", "show", "bad.yaml", "--spool", dir)
	if code != 0 || !strings.Contains(stdout, "Error code:") || !strings.Contains(stdout, "invalid_request") {
		t.Errorf("runs show (table): exit %d\n%s", code, stdout)
	}
}

func TestDaemonCommandErrors(t *testing.T) {
	spool := t.TempDir()
	bad := t.TempDir()
	if err := os.WriteFile(filepath.Join(bad, "c.yaml"), []byte("apiVersion: pcsync.io/v1alpha1\nkind: Company\nmetadata: {name: x}\nspec: {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"invalid config", []string{"--config", bad, "--spool", spool, "--executor", "local", "--once"}, 1, "spec.id"},
		{"unknown executor", []string{"--config", "../../examples/demo", "--spool", spool, "--executor", "docker"}, 2, `--executor "docker"`},
		{"missing spool", []string{"--config", "../../examples/demo", "--executor", "local"}, 2, "spool"},
		{"spool not a directory", []string{"--config", "../../examples/demo", "--spool", "runs_test.go", "--executor", "local", "--once"}, 2, "not a directory"},
		// Without --once the daemon runs on; a spool it cannot serve ends
		// it with the reason, at once, not at SIGTERM (TestDaemonSpoolAtStart).
		{"spool and its parent missing, serving", []string{"--config", "../../examples/demo", "--spool", filepath.Join(spool, "missing", "spool"), "--executor", "local",
			"--metrics-bind-address", "127.0.0.1:0"}, 2, "missing, and so is its parent directory"},
		{"spool not a directory, serving", []string{"--config", "../../examples/demo", "--spool", "runs_test.go", "--executor", "local",
			"--metrics-bind-address", "127.0.0.1:0"}, 2, "not a directory"},
		{"invalid config as DIR", []string{bad, "--spool", spool, "--executor", "local", "--once"}, 1, "spec.id"},
		{"no config directory", []string{"--spool", spool, "--executor", "local", "--once"}, 2,
			"the config directory is missing: pcsync daemon DIR (or --config DIR)"},
		{"two config directories", []string{"../../examples/demo", "--config", bad, "--spool", spool, "--executor", "local", "--once"}, 2,
			`the config directory is given twice: "../../examples/demo" and --config "` + bad + `"`},
		{"two arguments", []string{"../../examples/demo", "extra", "--spool", spool}, 2, "accepts at most 1 arg"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := pcsync(t, append([]string{"daemon"}, tt.args...)...)
			if code != tt.code || !strings.Contains(stderr, tt.want) {
				t.Errorf("exit %d, want %d; stderr lacks %q:\n%s", code, tt.code, tt.want, stderr)
			}
		})
	}
	code, _, stderr := pcsync(t, "runs", "list", "--spool", spool, "-o", "yaml")
	if code != 2 || !strings.Contains(stderr, "want table or json") {
		t.Errorf("runs list -o yaml: exit %d\n%s", code, stderr)
	}
}
