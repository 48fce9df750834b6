//go:build integration

package realnode

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/pcsync/pcsync/internal/testing/docwalk"
	"github.com/pcsync/pcsync/internal/testing/testcluster"
	"github.com/pcsync/pcsync/internal/testing/testkustomize"
	"github.com/pcsync/pcsync/pkg/images"
	"github.com/pcsync/pcsync/pkg/result"
)

// docSection is one section of a walkthrough spread over several: its
// heading and the number of shell blocks it has (hack/gendocs's
// TestDocsWalkthroughsFound checks both from the literals below).
type docSection struct {
	doc, heading string
	blocks       int
}

// gettingStarted is what TestGettingStarted follows of
// docs/getting-started.md: sections 2 to 6, their shell blocks in order, as
// one script. Section 1 (k3d's cluster and registry) is the harness's: its
// cluster with the real node, and its registry, which the substitutions put
// in; section 2's `make images BUILDER=docker` needs Docker, so its images
// are the harness's too (pushImages: make images' definitions, built
// without Docker, and the stand-in Claude Code), pushed where the page's
// registry would hold them, at the tag the page reads. Section 7 (pcsync
// doctor in pcsync's pod) is not followed: the harness's registry listens
// on the host's loopback, which a pod does not reach, so its images row
// would fail here and not on k3d; doctor's rows have their own tests.
var gettingStarted = []docSection{
	{doc: "docs/getting-started.md", heading: "## 2. pcsync's images", blocks: 1},
	{doc: "docs/getting-started.md", heading: "## 3. A config repository with a first company", blocks: 1},
	{doc: "docs/getting-started.md", heading: "## 4. Install pcsync with `kubectl -k`", blocks: 2},
	{doc: "docs/getting-started.md", heading: "## 5. The model key", blocks: 1},
	{doc: "docs/getting-started.md", heading: "## 6. A first run", blocks: 2},
}

// gettingStartedScript is the sections' shell blocks, in order, with subs
// put in (docwalk.Sections).
func gettingStartedScript(root string, subs [][2]string) (string, error) {
	sections := make([]docwalk.Section, len(gettingStarted))
	for i, s := range gettingStarted {
		if s.doc != gettingStarted[0].doc {
			return "", fmt.Errorf("gettingStarted: %s is not %s", s.doc, gettingStarted[0].doc)
		}
		sections[i] = docwalk.Section{Heading: s.heading, Blocks: s.blocks}
	}
	return docwalk.Sections(filepath.Join(root, gettingStarted[0].doc), sections, subs)
}

// pushGettingStartedImages puts pcsync's image (this tree's) and the
// stand-in Claude Code at registry with tag, where make images would have
// pushed them: the daemon runs its agents' images from its own image's
// registry and tag.
func pushGettingStartedImages(t *testing.T, reg *testcluster.Registry, p pushed, registry, tag string) {
	t.Helper()
	ctx := context.Background()
	for name, from := range map[string]string{images.Pcsync: p.RealRegistry, images.Agent("claude"): p.Registry} {
		img, err := reg.Image(ctx, images.Ref(from, name, imageTag))
		if err != nil {
			t.Fatal(err)
		}
		if err := reg.Push(ctx, images.Ref(registry, name, tag), img); err != nil {
			t.Fatal(err)
		}
	}
}

// docs/getting-started.md followed word for word from its second section
// on (gettingStarted says what stands in for the first): `make build`, a
// clone of an empty config repository (the test's Git server, which
// git-sync clones over HTTP) in which the reader writes acme.yaml,
// validates it with the pcsync just built, commits and pushes; the overlay
// of deploy/base, applied with kubectl -k, rolled out, the tenant applied
// from Git; the model key stored; a run dropped into the spool with
// kubectl exec, its result waited for and shown with pcsync runs. The test
// then reads the result from the spool volume: the stand-in's answer to the
// page's prompt, succeeded, with its tokens, and the run's Job Complete.
func TestGettingStarted(t *testing.T) {
	c, node, apiHost, _ := deployNode(t)
	p := pushImages(t)
	pushGitSync(t, node.Registry(), mirrorImage(t, node, deployImage(t, "deploy/base/deployment.yaml", gitSyncImage)))
	registry := node.Registry().Host() + "/getting-started"
	pushGettingStartedImages(t, node.Registry(), p, registry, makeVersion(t))
	c.OnlyRealNode(t)
	const tenant = "paperclip-acme"
	spool := hostVolume(t, c, baseNamespace, "pcsync-spool", corev1.ReadWriteOnce)

	// The reader's machine: a home, a clone of their empty repository.
	root := repoRoot(t)
	home := t.TempDir()
	repo := newGitServer(t, apiHost)
	clone := filepath.Join(home, "pcsync-config")
	env := append(goCaches(t), "HOME="+home, "KUBECONFIG="+c.KubeconfigPath(), "GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_NAME=Reader", "GIT_AUTHOR_EMAIL=reader@pcsync.invalid",
		"GIT_COMMITTER_NAME=Reader", "GIT_COMMITTER_EMAIL=reader@pcsync.invalid",
		"ANTHROPIC_API_KEY=sk-ant-getting-started-not-a-key")
	cmd := exec.Command("git", "clone", "-q", repo.bare, clone)
	cmd.Env = append(os.Environ(), env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git clone %s: %v\n%s", repo.bare, err, out)
	}

	script, err := gettingStartedScript(root, [][2]string{
		{"~/src/pcsync", root},
		{"$HOME/src/pcsync", root},
		{" images BUILDER=docker REGISTRY=localhost:5111 PUSH=1", ""},
		{"k3d-pcsync-registry.localhost:5111", registry},
		{"https://github.com/you/pcsync-config.git", repo.url},
	})
	if err != nil {
		t.Fatal(err)
	}
	// A bound for a hung walk, not a timed assertion.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	start := time.Now()
	out, stop, err := docwalk.Run(ctx, clone, script, env)
	stop(0)
	objs, berr := testkustomize.BuildDir(filepath.Join(home, "pcsync-deploy"))
	t.Cleanup(func() { cleanupDeployment(t, c, objs, tenant) })
	t.Logf("docs/getting-started.md followed in %s:\n%s", time.Since(start).Round(time.Second), testcluster.LastLines(out, 40))
	if berr != nil {
		t.Errorf("kustomize build of the page's overlay: %v", berr)
	}
	if err != nil {
		t.Fatalf("the walkthrough failed: %v\n%s\n%s\n%s", err, testcluster.LastLines(out, 60), podsReport(c, baseNamespace), podsReport(c, tenant))
	}
	checkGettingStartedRun(ctx, t, c, spool, tenant, out, objs)
}

// goCaches keeps the Go toolchain's module and build caches where this
// process has them, as a reader's own home would: the walk's HOME is new.
func goCaches(t *testing.T) []string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOPATH", "GOMODCACHE", "GOCACHE").Output()
	if err != nil {
		t.Fatalf("go env: %v", err)
	}
	v := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(v) != 3 {
		t.Fatalf("go env printed %q", out)
	}
	return []string{"GOPATH=" + v[0], "GOMODCACHE=" + v[1], "GOCACHE=" + v[2]}
}

// checkGettingStartedRun checks what the page's run left: its result in
// the spool, which pcsync runs show printed too, and its Job.
func checkGettingStartedRun(ctx context.Context, t *testing.T, c *testcluster.Cluster, spool, tenant, out string, objs []*unstructured.Unstructured) {
	t.Helper()
	if len(objs) == 0 {
		t.Error("the page's overlay built no objects")
	}
	r, err := result.Read(filepath.Join(spool, "hello"+result.Suffix))
	if err != nil {
		t.Fatalf("the result of run hello: %v", err)
	}
	if r.Status != result.StatusSucceeded {
		t.Fatalf("run hello: status %s (%s: %s), want succeeded", r.Status, deref(r.ErrorCode), deref(r.ErrorMessage))
	}
	if r.Summary == nil || !strings.Contains(*r.Summary, "Pods rise and fall") {
		t.Errorf("run hello: summary %q, want the stand-in's haiku", deref(r.Summary))
	}
	if r.Usage == nil || r.Usage.OutputTokens != 17 {
		t.Errorf("run hello: usage %+v, want the stand-in's (17 output tokens)", r.Usage)
	}
	if !strings.Contains(out, "Pods rise and fall") {
		t.Errorf("pcsync runs show hello printed no summary:\n%s", testcluster.LastLines(out, 30))
	}
	job, err := waitJobComplete(ctx, c, tenant, "hello")
	if err != nil {
		t.Fatalf("the Job of run hello: %v\n%s", err, podsReport(c, tenant))
	}
	t.Logf("run hello: %s, Job %s/%s Complete", r.Status, tenant, job.Name)
}
