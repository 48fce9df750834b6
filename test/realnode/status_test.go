//go:build integration

package realnode

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pcsync/pcsync/internal/testing/testcluster"
)

// buildCLI builds pcsync from this tree (go build ./cmd/pcsync) into a
// directory of the test's and returns its path.
func buildCLI(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "pcsync")
	build := exec.Command("go", "build", "-o", bin, "./cmd/pcsync")
	build.Dir = "../.."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/pcsync: %v\n%s", err, out)
	}
	return bin
}

// waitGetCompanies runs `pcsync get companies -n ns` (the CLI built from
// this tree, as a user runs it against the cluster) until each company of
// want shows READY True at its REVISION, and returns the last table.
func waitGetCompanies(ctx context.Context, t *testing.T, c *testcluster.Cluster, ns string, want map[string]string) string {
	t.Helper()
	bin := buildCLI(t)
	var last string
	for {
		cmd := exec.CommandContext(ctx, bin, "get", "companies", "-n", ns, "--kubeconfig", c.KubeconfigPath())
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		last = stdout.String() + stderr.String()
		if err == nil && showsReady(stdout.String(), want) {
			return stdout.String()
		}
		select {
		case <-ctx.Done():
			t.Fatalf("pcsync get companies -n %s: want %v Ready at those revisions; last (%v):\n%s", ns, want, err, last)
		case <-time.After(time.Second):
		}
	}
}

// showsReady says the table shows each company of want (name → revision)
// READY True at that REVISION.
func showsReady(table string, want map[string]string) bool {
	rows := map[string][]string{}
	for _, line := range strings.Split(table, "\n") {
		if f := strings.Fields(line); len(f) >= 3 {
			rows[f[0]] = f
		}
	}
	for name, rev := range want {
		f := rows[name]
		if len(f) < 3 || f[1] != "True" || f[2] != rev {
			return false
		}
	}
	return true
}
