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
	d := startKubeDaemon(t, proxy.KubeconfigPath(), c.Namespace(t, "podwatch", nil))
	// A consumer with an informer of its own would have opened its watch
	// right after its list: give it the time to.
	time.Sleep(2 * time.Second)
	mu.Lock()
	got := append([]string(nil), watches...)
	mu.Unlock()
	if diff := cmp.Diff([]string{podinformer.Selector()}, got); diff != "" {
		e := d.stop(t)
		t.Errorf("the daemon's cluster-wide pod watches, by label selector (-want +got):\n%s\ndaemon (exit %d):\n%s", diff, e.code, e.stderr)
	}
}

// kubeDaemon is a daemon of the Kubernetes executor and the sandbox,
// with its metrics served.
type kubeDaemon struct {
	cancel context.CancelFunc
	done   chan daemonExit
	exit   *daemonExit
	// metrics is the base URL of /metrics and /readyz.
	metrics string
}

type daemonExit struct {
	code   int
	stderr string
}

// startKubeDaemon starts a daemon with both roads to the cluster of
// kubeconfig (its ApplySet in ns, applying nothing) and waits until its
// runs loop and sandbox serve; the test's end stops it.
func startKubeDaemon(t *testing.T, kubeconfig, ns string) *kubeDaemon {
	t.Helper()
	dir, spool, state := t.TempDir(), t.TempDir(), t.TempDir()
	writeConfig(t, dir, map[string]string{
		"settings.yaml": "apiVersion: pcsync.io/v1alpha1\nkind: Settings\nmetadata: {name: podwatch}\nspec:\n  namespacePrefix: podwatch-\n",
		"acme.yaml": "apiVersion: pcsync.io/v1alpha1\nkind: Company\nmetadata: {name: acme}\nspec:\n  id: acme-id\n" +
			"  agents:\n    - {name: coder, adapter: claude_local}\n",
	})
	addr := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	d := &kubeDaemon{cancel: cancel, done: make(chan daemonExit, 1), metrics: "http://" + addr}
	go func() {
		code, _, stderr := runCmdContext(ctx, t, newDaemonCmd, kubeconfig, dir, "--executor", "kubernetes",
			"--no-reconcile", "--spool", spool, "--state-dir", state, "--skip-network-check",
			"--applyset", "pcsync-podwatch", "--applyset-namespace", ns, "--sandbox", "--metrics-bind-address", addr)
		d.done <- daemonExit{code, stderr}
	}()
	t.Cleanup(func() { d.stop(t) })
	// Up: the executor's status and the sandbox's socket are there once
	// every consumer of the pods has registered.
	deadline := time.Now().Add(2 * time.Minute)
	for !daemonUp(state) {
		if time.Now().After(deadline) {
			e := d.stop(t)
			t.Fatalf("the daemon did not start within 2 minutes (exit %d):\n%s", e.code, e.stderr)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return d
}

// stop stops the daemon (once) and returns how it exited.
func (d *kubeDaemon) stop(t *testing.T) daemonExit {
	t.Helper()
	if d.exit != nil {
		return *d.exit
	}
	d.cancel()
	select {
	case e := <-d.done:
		d.exit = &e
		return e
	case <-time.After(time.Minute):
		t.Fatal("the daemon did not stop within a minute")
		return daemonExit{}
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
