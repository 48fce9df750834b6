package main

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/spf13/cobra"

	"github.com/pcsync/pcsync/internal/lib/kube"
)

// recordingServer counts every request; a config that never reaches the cluster
// leaves it at zero.
func recordingServer(t *testing.T) (kubeconfig string, requests *atomic.Int64) {
	t.Helper()
	requests = &atomic.Int64{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		http.Error(w, "not a real API server", http.StatusInternalServerError)
	}))
	t.Cleanup(srv.Close)
	kubeconfig = filepath.Join(t.TempDir(), "kubeconfig")
	kc := "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: \"" + srv.URL + "\"}\n" +
		"users:\n- name: u\n  user: {token: t}\ncontexts:\n- name: c\n  context: {cluster: c, user: u}\ncurrent-context: c\n"
	if err := os.WriteFile(kubeconfig, []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}
	return kubeconfig, requests
}

// runCmd runs one command built by newCmd, as run would, and returns the exit code.
func runCmd(t *testing.T, newCmd func(*globalOptions) *cobra.Command, kubeconfig string, args ...string) (int, string, string) {
	t.Helper()
	return runCmdContext(context.Background(), t, newCmd, kubeconfig, args...)
}

// runCmdContext is runCmd until ctx ends.
func runCmdContext(ctx context.Context, t *testing.T, newCmd func(*globalOptions) *cobra.Command, kubeconfig string, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	g := &globalOptions{Kube: kube.DefaultFlags(), Stdout: &stdout, Stderr: &stderr,
		Logger: slog.New(slog.NewTextHandler(&stderr, nil))}
	g.Kube.Kubeconfig = kubeconfig
	cmd := newCmd(g)
	cmd.SetArgs(args)
	cmd.SetOut(&stdout)
	cmd.SetErr(&stderr)
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	err := cmd.ExecuteContext(ctx)
	return exitCode(err), stdout.String(), stderr.String()
}

func TestApplyAndDiffNeverReachTheClusterWithAnInvalidConfig(t *testing.T) {
	kubeconfig, requests := recordingServer(t)
	bad := filepath.Join("..", "..", "testdata", "badconfig", "many-errors")
	if _, err := os.Stat(bad); err != nil {
		t.Fatalf("test data: %v", err)
	}
	// diff's exit code 1 means differences: an invalid config is an error, 2.
	tests := []struct {
		name     string
		newCmd   func(*globalOptions) *cobra.Command
		args     []string
		wantCode int
	}{
		{"apply --prune", newApplyCmd, []string{"--prune", "--allow-mass-prune", bad}, 1},
		{"diff --prune", newDiffCmd, []string{"--prune", bad}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runCmd(t, tt.newCmd, kubeconfig, tt.args...)
			if code != tt.wantCode {
				t.Errorf("exit code %d, want %d; stderr:\n%s", code, tt.wantCode, stderr)
			}
			if stdout != "" || !strings.Contains(stderr, "invalid config") {
				t.Errorf("stdout %q, stderr:\n%s", stdout, stderr)
			}
			if n := requests.Load(); n != 0 {
				t.Errorf("%d requests reached the cluster", n)
			}
		})
	}
}

func TestApplyFlagErrors(t *testing.T) {
	kubeconfig, requests := recordingServer(t)
	good := filepath.Join("..", "..", "testdata", "render", "minimal", "config")
	if _, err := os.Stat(good); err != nil {
		t.Fatalf("test data: %v", err)
	}
	for _, args := range [][]string{
		{"--prune-max", "lots", good},
		{"-o", "yaml", good},
	} {
		code, _, stderr := runCmd(t, newApplyCmd, kubeconfig, args...)
		if code != 2 {
			t.Errorf("%v: exit code %d, want 2; stderr:\n%s", args, code, stderr)
		}
	}
	if n := requests.Load(); n != 0 {
		t.Errorf("%d requests reached the cluster", n)
	}
}

// TestUnsafePatchesRefusedOrWarned checks the tenant baseline guard from
// the command line: diff refuses a company whose patch breaks the baseline
// at the patch, before any request; render and diff print each allowed
// exemption as a warning, every time.
func TestUnsafePatchesRefusedOrWarned(t *testing.T) {
	kubeconfig, requests := recordingServer(t)
	refused := filepath.Join("..", "..", "testdata", "badpatches", "rbac", "config")
	allowed := filepath.Join("..", "..", "testdata", "render", "patches-fallback", "config")
	code, _, stderr := runCmd(t, newDiffCmd, kubeconfig, refused)
	if want := filepath.Join(refused, "companies.yaml") + `:8:7: spec.patches[0]: company "wildcard": patch 0 breaks the tenant's rbac:`; code != 2 || !strings.Contains(stderr, want) {
		t.Errorf("diff of %s: exit code %d, want 2 and a line with %q; stderr:\n%s", refused, code, want, stderr)
	}
	if n := requests.Load(); n != 0 {
		t.Errorf("%d requests reached the cluster", n)
	}
	for _, tt := range []struct {
		name   string
		newCmd func(*globalOptions) *cobra.Command
	}{{"render", newRenderCmd}, {"diff", newDiffCmd}} {
		_, _, stderr := runCmd(t, tt.newCmd, kubeconfig, allowed)
		for _, want := range []string{
			filepath.Join(allowed, "companies.yaml") + `:27:3: warning: spec.allowUnsafePatches: company "renamer": patches may weaken objectIdentity`,
			filepath.Join(allowed, "companies.yaml") + `:29:7: warning: spec.patches[0]: company "renamer": patch 0 weakens the tenant's objectIdentity (allowed by spec.allowUnsafePatches)`,
		} {
			if !strings.Contains(stderr, want) {
				t.Errorf("%s: no warning %q; stderr:\n%s", tt.name, want, stderr)
			}
		}
	}
}
