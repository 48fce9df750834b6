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

	"github.com/pcsync/pcsync/internal/testing/docwalk"
	"github.com/pcsync/pcsync/internal/testing/testcluster"
	"github.com/pcsync/pcsync/internal/testing/testkustomize"
)

// A walkthrough of the docs that a test follows word for word: its one
// shell block, with only the reader's own values put in.
type walkthrough struct {
	// doc is the markdown file, relative to the repository; heading the
	// section's heading line.
	doc, heading string
	// subs put the reader's values in (the checkout and the registry are
	// put in for every walkthrough).
	subs [][2]string
	// namespace is where its pods run, for the report of a failure.
	namespace string
}

// paperclipWalkthrough is deploy/paperclip/README.md's, which
// TestPaperclipOverlay follows: Paperclip's public URL is the Service's.
func paperclipWalkthrough(repoURL string) walkthrough {
	return walkthrough{doc: "deploy/paperclip/README.md", heading: "## Walkthrough: Paperclip with pcsync on your cluster",
		namespace: paperclipNamespace, subs: [][2]string{
			{"https://git.example.com/platform/paperclip-config.git", repoURL},
			{"{name: GITSYNC_PERIOD, value: 30s}", "{name: GITSYNC_PERIOD, value: " + gitSyncPeriod.String() + "}"},
			{"https://paperclip.example.com", paperclipPublicURL},
		}}
}

// baseWalkthrough is docs/how-to/install.md's, which TestDeployBaseGitSync follows.
func baseWalkthrough(repoURL string) walkthrough {
	return walkthrough{doc: "docs/how-to/install.md", heading: "### Walkthrough: deploy/base on your cluster",
		namespace: baseNamespace, subs: [][2]string{
			{"https://git.example.com/platform/pcsync-config.git", repoURL},
			{"{name: GITSYNC_PERIOD, value: 30s}", "{name: GITSYNC_PERIOD, value: " + gitSyncPeriod.String() + "}"},
		}}
}

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

// follow follows the walkthrough with the checkout and a registry of the
// real node put in besides its own values, and KUBECONFIG the test
// cluster's, and returns the objects it applied (for the cleanup). A failed
// step fails the test.
func (w walkthrough) follow(t *testing.T, c *testcluster.Cluster, registry string) []*unstructured.Unstructured {
	t.Helper()
	root := repoRoot(t)
	subs := append([][2]string{{"~/src/pcsync", root}, {"registry.example.com/platform", registry}}, w.subs...)
	script, err := docwalk.Script(filepath.Join(root, w.doc), w.heading, 1, subs)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	start := time.Now()
	out, stop, err := docwalk.Run(ctx, dir, script, []string{"KUBECONFIG=" + c.KubeconfigPath()})
	stop(0)
	t.Logf("%s %q followed in %s:\n%s", w.doc, w.heading, time.Since(start).Round(time.Second), testcluster.LastLines(out, 30))
	objs, berr := testkustomize.BuildDir(dir)
	if berr != nil {
		t.Errorf("kustomize build of the walkthrough's overlay %s: %v", dir, berr)
	}
	if err != nil {
		report := podsReport(c, w.namespace)
		cleanupDeployment(t, c, objs, "")
		t.Fatalf("the walkthrough failed: %v\n%s\n%s", err, testcluster.LastLines(out, 60), report)
	}
	return objs
}
