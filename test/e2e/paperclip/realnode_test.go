//go:build integration

package paperclip

import (
	"context"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/pcsync/pcsync/internal/testing/testcluster"
	"github.com/pcsync/pcsync/internal/testing/testimages"
	"github.com/pcsync/pcsync/pkg/images"
)

// Stand-in images on the real node: pcsync's base (make images'
// definition, built by internal/imagebuild) with the e2e stand-in CLI as
// claude and a transcript beside it, pushed to the node's registry as
// pcsync's claude image, tagged with the release version (images.Version),
// the tag that the daemon these tests build resolves pcsync's images to.
const (
	realNodeTag        = images.Version
	inImageTranscript  = "/usr/local/share/pcsync-standin/transcript.jsonl"
	realNodeTranscript = "claude-obers-small-success.jsonl"
)

var (
	realNodeOnce     sync.Once
	realNodeRegistry string
	realNodeErr      error
)

// realNodeImages pushes the stand-in claude image and pcsync's image (for a
// lease's helper container, should one be needed) once, and returns their
// registry (host:port/org), Settings spec.images.registry.
func realNodeImages(t testing.TB) string {
	t.Helper()
	c := testcluster.Get(t)
	node := c.RealNode()
	if node == nil {
		t.Fatalf("the cluster has no real node (TestMain sets Options.RealNode): %v", c.RealNodeError())
	}
	tl := getTools(t)
	realNodeOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
		defer cancel()
		built, err := testimages.Build(ctx, []string{images.Base, images.Pcsync}, realNodeTag)
		if err != nil {
			realNodeErr = err
			return
		}
		script, err := os.ReadFile(tl.Standin)
		if err != nil {
			realNodeErr = err
			return
		}
		transcript, err := os.ReadFile(repoSample(t, realNodeTranscript))
		if err != nil {
			realNodeErr = err
			return
		}
		realNodeRegistry = node.Registry().Host() + "/e2e"
		claude := testimages.DefaultStandInOptions()
		claude.Base = built[images.Base]
		claude.Files = map[string]string{
			"usr/local/bin/claude":                     string(script),
			strings.TrimPrefix(inImageTranscript, "/"): string(transcript),
		}
		if _, err := testimages.StandIn(ctx, node.Registry(), images.Ref(realNodeRegistry, images.Agent("claude"), realNodeTag), claude); err != nil {
			realNodeErr = err
			return
		}
		realNodeErr = testimages.Push(ctx, node.Registry(), realNodeRegistry, realNodeTag, map[string]v1.Image{images.Pcsync: built[images.Pcsync]})
	})
	if realNodeErr != nil {
		t.Fatalf("stand-in images for the real node: %v", realNodeErr)
	}
	return realNodeRegistry
}

// realNodeTurn is held by the test that has the real node (onRealNode).
var realNodeTurn sync.Mutex

// onRealNode makes t a test of the real node: it runs once the package's
// other tests are done (t.Parallel), and alone among the real node's
// tests. make test runs this package beside test/realnode, which holds
// the machine's one real node for most of the run: the tests that need
// only kwok run meanwhile, and those that need the node wait for it
// together, at the end.
func onRealNode(t *testing.T) {
	t.Helper()
	t.Parallel()
	realNodeTurn.Lock()
	t.Cleanup(realNodeTurn.Unlock)
}

// checkTurn fails a test that takes the real node without onRealNode.
func checkTurn(t testing.TB) {
	t.Helper()
	if _, ok := t.(*testing.T); ok && realNodeTurn.TryLock() {
		realNodeTurn.Unlock()
		t.Fatal("a test of the real node calls onRealNode first")
	}
}

// newRealNodeSandboxWorld is a sandbox world whose lease pods run on the
// real node, from the stand-in images.
func newRealNodeSandboxWorld(t testing.TB, srv *server) *sandboxWorld {
	t.Helper()
	return newRealNodeSandboxWorldWith(t, srv, sandboxOptions{})
}

// newRealNodeSandboxWorldWith is newRealNodeSandboxWorld with options (its
// images' Settings and RealNode are set here).
func newRealNodeSandboxWorldWith(t testing.TB, srv *server, o sandboxOptions) *sandboxWorld {
	t.Helper()
	checkTurn(t)
	registry := realNodeImages(t)
	host, _, _ := strings.Cut(registry, "/")
	o.RealNode = true
	o.Settings = map[string]any{"images": map[string]any{"registry": registry, "allowList": []any{host + "/*/*"}}}
	sw := newSandboxWorld(t, srv, o)
	sw.c.OnlyRealNode(t)
	return sw
}

// realNodeAgent is a stock claude_local agent of the world whose stand-in
// CLI replays the transcript baked into its image.
func (sw *sandboxWorld) realNodeAgent(t testing.TB, name string) agent {
	t.Helper()
	return sw.realNodeAgentIn(t, name, sw.envID)
}

// realNodeAgentIn is realNodeAgent in environment envID (its transcript is
// the image's).
func (sw *sandboxWorld) realNodeAgentIn(t testing.TB, name, envID string) agent {
	t.Helper()
	return sw.sandboxAgentIn(t, envID, name, "claude_local", transcript{}, map[string]string{
		"STANDIN_TRANSCRIPT": inImageTranscript, "STANDIN_RECORD": "",
	}, nil)
}

// TestSandboxClaudeRunOnRealNode: a whole stock claude_local run through the
// real Paperclip, its CLI in a lease pod on the real kubelet (the stand-in
// CLI in an image built from pcsync's base): the probe is green, the run
// ends succeeded with the transcript's tokens, cost and session and its
// lines in Paperclip's log, the pod ran on the real node from pcsync's
// claude image with no helper container, and it is gone after the run.
func TestSandboxClaudeRunOnRealNode(t *testing.T) {
	onRealNode(t)
	srv := sharedServer(t)
	tr := readTranscript(t, realNodeTranscript)
	sw := newRealNodeSandboxWorld(t, srv)

	var probe map[string]any
	srv.API.must(t, "POST", "/api/environments/"+sw.envID+"/probe?companyId="+sw.company.ID, map[string]any{}, &probe)
	if ok, _ := probe["ok"].(bool); !ok {
		t.Fatalf("probe of the pcsync environment: %v", probe)
	}

	sw.runOnRealNode(t, tr, "e2e: sandbox on the real node")
	want := images.Ref(realNodeRegistry, images.Agent("claude"), realNodeTag)
	sw.mu.Lock()
	defer sw.mu.Unlock()
	for name, p := range sw.pods {
		if len(p.Spec.Containers) != 1 || p.Spec.Containers[0].Image != want || len(p.Spec.InitContainers) != 0 {
			t.Errorf("lease pod %s: containers %v, init containers %d; want one of %s, no helper and no init container", name, containerImages(p), len(p.Spec.InitContainers), want)
		}
	}
}

// runOnRealNode wakes a new stock claude_local agent of the world (its
// stand-in CLI replaying tr from its image) and checks its run: succeeded
// with the transcript's tokens, cost and session and its lines in
// Paperclip's log; every lease pod seen ran on the real node and is gone.
func (sw *sandboxWorld) runOnRealNode(t *testing.T, tr transcript, why string) {
	t.Helper()
	coder := sw.realNodeAgent(t, "Coder")
	runAndCheck(t, sw.srv, coder.ID, why, runCheck{Within: 3 * time.Minute, Figures: stockFigures(t, tr), Transcript: tr, Log: sw.daemon.out.String})
	sw.waitNoPods(t, time.Minute)
	sw.mu.Lock()
	defer sw.mu.Unlock()
	if len(sw.pods) == 0 {
		t.Fatalf("no lease pod was seen in %s", sw.ns)
	}
	for name, p := range sw.pods {
		if p.Spec.NodeName != sw.c.RealNode().Name() {
			t.Errorf("lease pod %s ran on node %q, want the real node %s", name, p.Spec.NodeName, sw.c.RealNode().Name())
		}
	}
}

func containerImages(p *corev1.Pod) []string {
	var out []string
	for _, c := range p.Spec.Containers {
		out = append(out, c.Image)
	}
	return out
}
