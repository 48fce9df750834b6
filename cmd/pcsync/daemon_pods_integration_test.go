//go:build integration

package main

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/pcsync/pcsync/internal/lib/podinformer"
	"github.com/pcsync/pcsync/internal/testing/testcluster"
)

// TestDaemonWatchesPodsOnce: a daemon with both roads to the cluster (the
// Kubernetes executor's run tracker, the sandbox's warm pools) and so the
// credential tokens' controller opens one watch of pods cluster-wide, of
// pcsync's pods: the three share the daemon's pod informer. The daemon
// reaches the API server through the test's proxy, which sees its
// requests.
func TestDaemonWatchesPodsOnce(t *testing.T) {
	c := testcluster.Get(t)
	var mu sync.Mutex
	var watches []string
	proxy := c.StartHTTPProxy(t, testcluster.HTTPProxyOptions{Seen: func(r *http.Request) {
		if q := r.URL.Query(); r.URL.Path == "/api/v1/pods" && q.Get("watch") == "true" {
			mu.Lock()
			watches = append(watches, q.Get("labelSelector"))
			mu.Unlock()
		}
	}})
	ns := c.Namespace(t, "podwatch", nil)
	dir, spool, state := t.TempDir(), t.TempDir(), t.TempDir()
	writeConfig(t, dir, map[string]string{
		"settings.yaml": "apiVersion: pcsync.io/v1alpha1\nkind: Settings\nmetadata: {name: podwatch}\nspec:\n  namespacePrefix: podwatch-\n",
		"acme.yaml": "apiVersion: pcsync.io/v1alpha1\nkind: Company\nmetadata: {name: acme}\nspec:\n  id: acme-id\n" +
			"  agents:\n    - {name: coder, adapter: claude_local}\n",
	})
	ctx, cancel := context.WithCancel(context.Background())
	type exit struct {
		code   int
		stderr string
	}
	done := make(chan exit, 1)
	go func() {
		code, _, stderr := runCmdContext(ctx, t, newDaemonCmd, proxy.KubeconfigPath(), dir, "--executor", "kubernetes",
			"--no-reconcile", "--spool", spool, "--state-dir", state, "--skip-network-check",
			"--applyset", "pcsync-podwatch", "--applyset-namespace", ns, "--sandbox")
		done <- exit{code, stderr}
	}()
	stop := func() exit {
		cancel()
		select {
		case e := <-done:
			return e
		case <-time.After(time.Minute):
			t.Fatal("the daemon did not stop within a minute")
			return exit{}
		}
	}
	defer func() {
		if ctx.Err() == nil {
			stop()
		}
	}()
	// Up: the executor's status and the sandbox's socket are there once
	// every consumer of the pods has registered.
	deadline := time.Now().Add(2 * time.Minute)
	for !daemonUp(state) {
		if time.Now().After(deadline) {
			e := stop()
			t.Fatalf("the daemon did not start within 2 minutes (exit %d):\n%s", e.code, e.stderr)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// A consumer with an informer of its own would have opened its watch
	// right after its list: give it the time to.
	time.Sleep(2 * time.Second)
	mu.Lock()
	got := append([]string(nil), watches...)
	mu.Unlock()
	if diff := cmp.Diff([]string{podinformer.Selector()}, got); diff != "" {
		e := stop()
		t.Errorf("the daemon's cluster-wide pod watches, by label selector (-want +got):\n%s\ndaemon (exit %d):\n%s", diff, e.code, e.stderr)
	}
}

// daemonUp says the daemon of state has started its runs loop with the
// Kubernetes executor and serves the sandbox API.
func daemonUp(state string) bool {
	b, err := os.ReadFile(filepath.Join(state, "status.json"))
	if err != nil || !strings.Contains(string(b), `"executor": "kubernetes"`) && !strings.Contains(string(b), `"executor":"kubernetes"`) {
		return false
	}
	_, err = os.Stat(filepath.Join(state, "sandbox.sock"))
	return err == nil
}

// writeConfig writes a config directory's files (name → content).
func writeConfig(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for n, b := range files {
		if err := os.WriteFile(filepath.Join(dir, n), []byte(b), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
