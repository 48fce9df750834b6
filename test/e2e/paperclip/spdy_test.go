//go:build integration

package paperclip

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/pcsync/pcsync/internal/testcluster"
)

// TestSandboxClaudeRunOverSPDY: a whole stock claude_local run through the
// real Paperclip, its CLI in a lease pod on the real kubelet, with the
// daemon reaching the API server only through a proxy that answers every
// WebSocket upgrade 403 (a load balancer that breaks WebSockets). The
// daemon's default exec protocol (auto) falls back to SPDY: the run ends
// succeeded with the transcript's tokens, cost and session and its lines in
// Paperclip's log, the lease pod is gone after, and the proxy saw the
// lease's exec ask for a WebSocket (refused) and then switch to SPDY.
func TestSandboxClaudeRunOverSPDY(t *testing.T) {
	srv := sharedServer(t)
	tr := readTranscript(t, realNodeTranscript)
	registry := realNodeImages(t)
	host, _, _ := strings.Cut(registry, "/")
	proxy := testcluster.Get(t).StartHTTPProxy(t, testcluster.HTTPProxyOptions{RefuseWebSocket: true})
	sw := newSandboxWorld(t, srv, sandboxOptions{RealNode: true,
		// The later --kubeconfig wins: every request of the daemon goes through the proxy.
		DaemonArgs: []string{"--kubeconfig", proxy.KubeconfigPath()},
		Settings: map[string]any{
			"images": map[string]any{"registry": registry, "allowList": []any{host + "/*/*"}},
		}})
	onlyRealNode(t, sw.c)

	coder := sw.realNodeAgent(t, "Coder", tr)
	run := srv.API.wake(t, coder.ID, "e2e: sandbox over SPDY")
	got := srv.API.waitRun(t, run.ID, 3*time.Minute)
	if diff := cmp.Diff(stockFigures(t, tr), figuresOf(got)); diff != "" {
		t.Errorf("Paperclip's run %s (-transcript +Paperclip):\n%s\nrun: %+v\ndaemon log:\n%s", run.ID, diff, got, tail(sw.daemon.out.String(), 6000))
	}
	checkRunLog(t, srv, run.ID, tr)
	sw.waitNoPods(t, time.Minute)

	counts := proxy.Counts()
	t.Logf("proxy: %v", counts)
	if counts.WebSocketRefused < 1 || counts.SPDYSwitched < 1 {
		t.Errorf("proxy: %v; want the lease's exec to ask for a WebSocket (refused), then switch to SPDY", counts)
	}
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
