//go:build integration

package paperclip

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pcsync/pcsync/internal/lib/agentpod"
	"github.com/pcsync/pcsync/internal/testing/docwalk"
	"github.com/pcsync/pcsync/internal/testing/testcluster"
	"github.com/pcsync/pcsync/pkg/images"
	"github.com/pcsync/pcsync/pkg/sandbox/leasepod"
)

// sandboxLeaseLabel marks a sandbox lease's pod.
const sandboxLeaseLabel = leasepod.LabelLease

// walkthrough is a section of the docs that a test follows word for word:
// its shell blocks, run in one bash session from an empty directory, with
// only what is the reader's own put in.
type walkthrough struct {
	// doc is the markdown file, relative to the repository.
	doc string
	// heading is the section's heading line.
	heading string
	// blocks is how many shell blocks the section has.
	blocks int
	// daemon is the line that starts pcsync's daemon, which runs on in the
	// background; ready is the file (after the substitutions) whose
	// existence says that it serves, which the next line waits for.
	daemon, ready string
	// subs put the reader's own values in, in order.
	subs [][2]string
}

// follow runs the walkthrough's shell blocks with env added, in a fresh
// short directory, and returns that directory and what the blocks printed.
// The daemon is stopped when the test ends.
func (w walkthrough) follow(t testing.TB, env ...string) (dir, output string) {
	t.Helper()
	tl := getTools(t)
	// The daemon's line goes to the background first (Script fails if the
	// docs no longer start it so).
	subs := append([][2]string{{w.daemon + "\n", w.daemon + " >daemon.log 2>&1 &\n" +
		"for i in $(seq 300); do [ -e " + w.ready + " ] && break; sleep 0.1; done\n"}}, w.subs...)
	script, err := docwalk.Script(filepath.Join(tl.Root, w.doc), w.heading, w.blocks, subs)
	if err != nil {
		t.Fatal(err)
	}
	dir = shortDir(t, "pcwt-")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	start := time.Now()
	out, stop, err := docwalk.Run(ctx, dir, script, env)
	// The daemon runs on in the script's process group.
	t.Cleanup(func() { stop(2 * time.Second) })
	t.Logf("%s %q followed in %s:\n%s", w.doc, w.heading, time.Since(start).Round(time.Second), tail(out, 6000))
	if err != nil {
		t.Fatalf("the walkthrough failed: %v\ndaemon log:\n%s", err, tail(readFileOr(filepath.Join(dir, "daemon.log")), 4000))
	}
	return dir, out
}

func readFileOr(path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	return string(data)
}

// walkthroughRun waits for the one run of the company the walkthrough woke
// to end.
func walkthroughRun(t testing.TB, srv *server, companyID string) heartbeatRun {
	t.Helper()
	deadline := time.Now().Add(5 * time.Minute)
	for time.Now().Before(deadline) {
		if rs := srv.API.companyRuns(t, companyID); len(rs) > 0 {
			return srv.API.waitRun(t, rs[0].ID, 5*time.Minute)
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatal("the walkthrough's wake made no run")
	return heartbeatRun{}
}

// checkWalkthroughEnd checks where a walkthrough ends without an API key:
// its one run failed in Paperclip with the real Claude Code's "Not logged
// in", and its pods ran on the real node from pcsync's claude image in its
// registry, tagged with the release version (make images' default tag).
func checkWalkthroughEnd(t testing.TB, srv *server, c *testcluster.Cluster, companyID string, pods *testcluster.PodWatch, registry string) {
	t.Helper()
	run := walkthroughRun(t, srv, companyID)
	stdout, _ := srv.API.runLog(t, run.ID)
	if run.Status != "failed" || !strings.Contains(stdout+str(run.Error), "Not logged in") {
		t.Errorf("run %s: status %s, error %q; want failed with Claude Code's \"Not logged in\"\nrun log:\n%s",
			run.ID, run.Status, str(run.Error), tail(stdout, 3000))
	}
	want := images.Ref(registry, images.Agent("claude"), images.Version)
	seen := pods.All()
	if len(seen) == 0 {
		t.Fatal("no pod of the run was seen in paperclip-acme")
	}
	for _, p := range seen {
		if p.Spec.NodeName != c.RealNode().Name() || len(p.Spec.Containers) == 0 || p.Spec.Containers[0].Image != want {
			t.Errorf("pod %s: node %q, images %v; want the real node %s and %s", p.Name, p.Spec.NodeName, containerImages(p), c.RealNode().Name(), want)
		}
	}
}

// realNodeCluster is the shared cluster with the real node as its one
// schedulable node while the test runs, as a reader's cluster would be.
func realNodeCluster(t testing.TB) *testcluster.Cluster {
	t.Helper()
	checkTurn(t)
	c := testcluster.Get(t)
	if c.RealNode() == nil {
		t.Fatalf("the cluster has no real node (TestMain sets Options.RealNode): %v", c.RealNodeError())
	}
	c.OnlyRealNode(t)
	return c
}

// TestWalkthroughSandbox follows docs/paperclip.md's walkthrough "a stock
// claude_local agent on the cluster" word for word on the real node, with
// its registry, the Paperclip URL and a short temporary directory for /spool
// put in, and no Anthropic key where the reader's goes (the test has none).
// The test ends where a key would be needed: the run's lease pod ran on the
// real node from the image step 1 built, the probe was ok, and Paperclip
// shows the real Claude Code's own "Not logged in".
func TestWalkthroughSandbox(t *testing.T) {
	onRealNode(t)
	srv := sharedServer(t)
	tl := getTools(t)
	c := realNodeCluster(t)
	company := srv.API.createCompany(t, "pcsync walkthrough")
	registry := c.RealNode().Registry().Host() + "/walkthrough"
	spool := filepath.Join(shortDir(t, "pcsp-"), "spool")
	pods := c.WatchPods(t, "paperclip-acme", sandboxLeaseLabel)
	_, out := walkthrough{
		doc: "docs/paperclip.md", heading: "### Walkthrough: a stock claude_local agent on the cluster", blocks: 6,
		daemon: "pcsync daemon ./config --spool /spool --sandbox", ready: "/spool/.pcsync/sandbox.sock",
		subs: [][2]string{
			{"~/src/pcsync", tl.Root},
			{"$HOME/src/pcsync", tl.Root},
			{"registry.example.com/platform", registry},
			{"http://127.0.0.1:3100", srv.URL},
			{"/spool", spool},
			// The reader's key; the test has none.
			{`{\"ANTHROPIC_API_KEY\": \"sk-ant-…\"}`, `{}`},
		},
	}.follow(t, "COMPANY_ID="+company.ID, "KUBECONFIG="+c.KubeconfigPath())
	if !strings.Contains(out, `"ok":true`) {
		t.Errorf("the probe did not answer ok:true")
	}
	checkWalkthroughEnd(t, srv, c, company.ID, pods, registry)
}

// TestWalkthroughREADME follows the README's "Running Paperclip's agents on
// Kubernetes with pcsync" word for word on the real node, with its registry,
// the Paperclip URL and a short temporary directory for /var/spool/pcsync
// put in: the run's Job runs the real Claude Code of the image the first
// step built, on the real node, and with no key Paperclip shows the CLI's
// own "Not logged in".
func TestWalkthroughREADME(t *testing.T) {
	onRealNode(t)
	srv := sharedServer(t)
	tl := getTools(t)
	c := realNodeCluster(t)
	company := srv.API.createCompany(t, "pcsync README")
	registry := c.RealNode().Registry().Host() + "/walkthrough"
	spool := filepath.Join(shortDir(t, "pcsp-"), "spool")
	pods := c.WatchPods(t, "paperclip-acme", agentpod.LabelRunID)
	walkthrough{
		doc: "README.md", heading: "## Running Paperclip's agents on Kubernetes with pcsync", blocks: 2,
		daemon: "pcsync daemon ./config --spool /var/spool/pcsync", ready: "/var/spool/pcsync/.pcsync/status.json",
		subs: [][2]string{
			{"~/src/pcsync", tl.Root},
			{"$HOME/src/pcsync", tl.Root},
			{"registry.example.com/platform", registry},
			{"http://127.0.0.1:3100", srv.URL},
			{"/var/spool/pcsync", spool},
		},
	}.follow(t, "COMPANY_ID="+company.ID, "KUBECONFIG="+c.KubeconfigPath())
	checkWalkthroughEnd(t, srv, c, company.ID, pods, registry)
}
