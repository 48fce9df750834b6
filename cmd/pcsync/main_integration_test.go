//go:build integration

package main

import (
	"context"
	"os"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pcsync/pcsync/internal/testing/testcluster"
)

func TestMain(m *testing.M) { os.Exit(testcluster.Main(m)) }

// TestApplyPaperclipDownStillAppliesKubernetes: with Paperclip down (nothing
// listens on its port), apply reports the Paperclip error naming the company
// and exits 2, and the Kubernetes side is applied all the same.
func TestApplyPaperclipDownStillAppliesKubernetes(t *testing.T) {
	c := testcluster.Get(t)
	t.Setenv("TEST_PCSYNC_BOARD_KEY", "pcp_board_x")
	dir := paperclipConfig(t, "http://127.0.0.1:1")
	code, stdout, stderr := runCmd(t, newApplyCmd, c.KubeconfigPath(), "--applyset", "pcsync-pc-down", dir)
	if code != 2 {
		t.Errorf("exit code %d, want 2; stdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if !strings.Contains(stderr, "paperclip company acme (id acme-id): list agents failed") {
		t.Errorf("stderr:\n%s", stderr)
	}
	if !strings.Contains(stdout, "namespace/paperclip-acme created") && !strings.Contains(stdout, "namespace/paperclip-acme unchanged") {
		t.Errorf("the Kubernetes side was not applied; stdout:\n%s", stdout)
	}
	if _, err := c.Client().CoreV1().Namespaces().Get(context.Background(), "paperclip-acme", metav1.GetOptions{}); err != nil {
		t.Errorf("namespace paperclip-acme: %v", err)
	}
	t.Logf("stdout:\n%s\nstderr:\n%s", stdout, stderr)
}
