//go:build integration

package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pcsync/pcsync/internal/testing/testcluster"
)

// runMainEnv makes the test binary behave as the devcluster command, so that `up` can
// re-execute it as its background supervisor.
const runMainEnv = "DEVCLUSTER_TEST_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(runMainEnv) == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func devcluster(t *testing.T, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], args...)
	cmd.Env = append(os.Environ(), runMainEnv+"=1")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func TestUpReuseStatusDown(t *testing.T) {
	dir := t.TempDir()
	bin := testcluster.DefaultBinDir()
	t.Cleanup(func() { _, _ = devcluster(t, "down", "--dir", dir) }) // in case a step fails

	out, err := devcluster(t, "up", "--dir", dir, "--bin-dir", bin)
	if err != nil || !strings.Contains(out, "dev cluster started") {
		t.Fatalf("up: %v\n%s", err, out)
	}
	b, err := os.ReadFile(filepath.Join(dir, "state.json"))
	if err != nil {
		t.Fatal(err)
	}
	var s state
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	if len(s.Components) != len(testcluster.Binaries) {
		t.Fatalf("state lists components %v", s.Components)
	}

	out, err = devcluster(t, "up", "--dir", dir, "--bin-dir", bin)
	if err != nil || !strings.Contains(out, "already running; reusing it") || !strings.Contains(out, s.Server) {
		t.Fatalf("second up should reuse %s: %v\n%s", s.Server, err, out)
	}
	if out, err := devcluster(t, "status", "--dir", dir); err != nil || !strings.Contains(out, "dev cluster running") {
		t.Fatalf("status: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := testcluster.Attach(ctx, filepath.Join(dir, "kubeconfig"))
	if err != nil {
		t.Fatalf("the written kubeconfig does not reach a ready cluster: %v", err)
	}
	if c.NodeName() == "" {
		t.Error("attached cluster has no node name")
	}

	if out, err := devcluster(t, "down", "--dir", dir); err != nil || !strings.Contains(out, "dev cluster stopped") {
		t.Fatalf("down: %v\n%s", err, out)
	}
	for name, pid := range s.Components {
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("%s (pid %d) survived down", name, pid)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "kubeconfig")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("kubeconfig left behind after down: %v", err)
	}
	if out, err := devcluster(t, "status", "--dir", dir); err == nil {
		t.Errorf("status after down succeeded:\n%s", out)
	}
}
