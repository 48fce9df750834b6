//go:build integration

package realnode

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/pcsync/pcsync/internal/docwalk"
	"github.com/pcsync/pcsync/internal/testcluster"
	"github.com/pcsync/pcsync/internal/testkustomize"
)

// paperclipWalkthrough is deploy/paperclip/README.md's walkthrough, which
// TestPaperclipOverlay follows word for word.
const (
	paperclipWalkthroughDoc     = "deploy/paperclip/README.md"
	paperclipWalkthroughHeading = "## Walkthrough: Paperclip with pcsync on your cluster"
)

// repoRoot is the repository's directory, absolute.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// makeVersion is `make -s version` in the repository: the tag make images
// gives the images, which the walkthrough reads the same way.
func makeVersion(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("make", "-s", "-C", repoRoot(t), "version").Output()
	if err != nil {
		t.Fatalf("make -s version: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// deployImage returns the image reference that file of deploy/ names for
// repository (e.g. ghcr.io/paperclipai/paperclip:2026.916.1).
func deployImage(t *testing.T, file, repository string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot(t), file))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`image: (` + regexp.QuoteMeta(repository) + `:\S+)`).FindSubmatch(data)
	if m == nil {
		t.Fatalf("%s names no image of %s", file, repository)
	}
	return string(m[1])
}

// followPaperclipWalkthrough follows the walkthrough with the reader's own
// values put in (the checkout, a registry of the real node, the test's Git
// repository and a 3 s period, Paperclip's public URL as the Service's) and
// KUBECONFIG the test cluster's, and returns the objects it applied (for
// the cleanup) and what it printed. A failed step fails the test.
func followPaperclipWalkthrough(t *testing.T, c *testcluster.Cluster, registry, repoURL string) ([]*unstructured.Unstructured, string) {
	t.Helper()
	root := repoRoot(t)
	script, err := docwalk.Script(filepath.Join(root, paperclipWalkthroughDoc), paperclipWalkthroughHeading, 1, [][2]string{
		{"~/src/pcsync", root},
		{"registry.example.com/platform", registry},
		{"https://git.example.com/platform/paperclip-config.git", repoURL},
		{"{name: GITSYNC_PERIOD, value: 30s}", "{name: GITSYNC_PERIOD, value: " + gitSyncPeriod.String() + "}"},
		{"https://paperclip.example.com", paperclipPublicURL},
	})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	start := time.Now()
	out, stop, err := docwalk.Run(ctx, dir, script, []string{"KUBECONFIG=" + c.KubeconfigPath()})
	stop(0)
	t.Logf("%s %q followed in %s:\n%s", paperclipWalkthroughDoc, paperclipWalkthroughHeading,
		time.Since(start).Round(time.Second), testcluster.LastLines(out, 30))
	objs, berr := testkustomize.BuildDir(dir)
	if berr != nil {
		t.Errorf("kustomize build of the walkthrough's overlay %s: %v", dir, berr)
	}
	if err != nil {
		cleanupDeployment(t, c, objs, "")
		t.Fatalf("the walkthrough failed: %v\n%s\n%s", err, testcluster.LastLines(out, 60), podsReport(c, paperclipNamespace))
	}
	return objs, out
}
