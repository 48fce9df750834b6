//go:build integration

package paperclip

import (
	"testing"

	"github.com/pcsync/pcsync/internal/testing/testcluster"
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
	onRealNode(t)
	srv := sharedServer(t)
	tr := readTranscript(t, realNodeTranscript)
	proxy := testcluster.Get(t).StartHTTPProxy(t, testcluster.HTTPProxyOptions{RefuseWebSocket: true})
	// The later --kubeconfig wins: every request of the daemon goes through the proxy.
	sw := newRealNodeSandboxWorldWith(t, srv, sandboxOptions{DaemonArgs: []string{"--kubeconfig", proxy.KubeconfigPath()}})
	sw.runOnRealNode(t, tr, "e2e: sandbox over SPDY")
	counts := proxy.Counts()
	t.Logf("proxy: %v", counts)
	if counts.WebSocketRefused < 1 || counts.SPDYSwitched < 1 {
		t.Errorf("proxy: %v; want the lease's exec to ask for a WebSocket (refused), then switch to SPDY", counts)
	}
}
