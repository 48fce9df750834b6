//go:build integration

package realnode

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pcsync/pcsync/internal/testing/lockedbuf"
	"github.com/pcsync/pcsync/internal/testing/testcluster"
	"github.com/pcsync/pcsync/pkg/config"
	"github.com/pcsync/pcsync/pkg/sandbox"
)

// A daemon stopping while a lease's command stream is still opening (the
// API server, or a proxy before it, never answers the exec's upgrade) stops
// at once: Close cancels the open rather than waiting out the lease's
// patience (10 minutes here), and leaves the exec's handshake, which
// client-go gives no deadline, to end with its connection; the lease's pod
// is left for the next daemon, which adopts it and runs a command on it.
func TestCloseWhileStreamOpens(t *testing.T) {
	p := pushImages(t)
	proxy := testcluster.Get(t).StartHTTPProxy(t, testcluster.HTTPProxyOptions{HoldUpgrades: true})
	state := t.TempDir()
	var log lockedbuf.Buffer
	e := newLeaseEnvWith(t, p, proxy.RESTConfig(), func(o *sandbox.Options) {
		o.StateDir, o.ReadyTimeout = state, 10*time.Minute
		o.Logger = slog.New(slog.NewTextHandler(io.MultiWriter(testWriter{t}, &log), &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	info, err := e.m.Acquire(ctx, sandbox.AcquireParams{Config: sandbox.EnvironmentConfig{Company: e.slug},
		AdapterType: "claude_local", RunID: "run-1", AgentID: pinnedAgentID})
	if err != nil {
		t.Fatalf("acquire: %v", err)
	}
	// The stream's open is under way: its upgrade is held.
	for proxy.Counts().Held == 0 {
		if ctx.Err() != nil {
			t.Fatalf("the lease's stream never asked for its exec: %v", proxy.Counts())
		}
		time.Sleep(50 * time.Millisecond)
	}
	closed := make(chan struct{})
	go func() {
		e.m.Close()
		close(closed)
	}()
	// A bound on a hang, not a speed target: without the cancel, Close
	// waits for the open's 10 minutes.
	select {
	case <-closed:
	case <-time.After(time.Minute):
		t.Fatalf("Close still waits a minute after it was called, with the stream's open held (proxy: %v)", proxy.Counts())
	}
	if strings.Contains(log.String(), "ending the lease") {
		t.Errorf("the stopping daemon ended the lease:\n%s", log.String())
	}
	if _, err := e.c.Client().CoreV1().Pods(e.ns).Get(ctx, info.ID, metav1.GetOptions{}); err != nil {
		t.Fatalf("the lease's pod is not left for the next daemon: %v", err)
	}

	// The next daemon, reaching the API server directly, adopts the lease.
	o := sandbox.DefaultOptions(state)
	o.Pool.Lease.Namespace = "default" // the pools' Lease: a namespace every cluster has
	o.Agents = agentIDs{pinnedAgentID: "pinned"}
	o.Logger = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	next, err := sandbox.New(ctx, e.c.RESTConfig(), func() *config.Model { return e.model }, o)
	if err != nil {
		t.Fatal(err)
	}
	defer next.Close()
	r, err := next.Execute(ctx, sandbox.ExecParams{LeaseID: info.ID, Command: "echo", Args: []string{"adopted"}}, nil)
	if err != nil || r.Stdout != "adopted\n" {
		t.Fatalf("execute on the adopted lease: %+v %v", r, err)
	}
	if _, err := next.Release(ctx, sandbox.ReleaseParams{ID: info.ID, Cancel: true}); err != nil {
		t.Fatalf("release: %v", err)
	}
}
