//go:build integration

package realnode

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pcsync/pcsync/internal/testing/lockedbuf"
	"github.com/pcsync/pcsync/internal/testing/testcluster"
	"github.com/pcsync/pcsync/pkg/sandbox"
)

// newProxiedLeaseEnv is a leaseEnv whose Manager reaches the API server
// through a proxy that refuses every WebSocket upgrade, with exec protocol
// proto; the Manager's log also goes to the returned buffer.
func newProxiedLeaseEnv(t *testing.T, proto sandbox.ExecProtocol) (*leaseEnv, *testcluster.HTTPProxy, *lockedbuf.Buffer) {
	t.Helper()
	p := pushImages(t)
	proxy := testcluster.Get(t).StartHTTPProxy(t, testcluster.HTTPProxyOptions{RefuseWebSocket: true})
	var log lockedbuf.Buffer
	e := newLeaseEnvWith(t, p, proxy.RESTConfig(), func(o *sandbox.Options) {
		o.ExecProtocol = proto
		o.Logger = slog.New(slog.NewTextHandler(io.MultiWriter(testWriter{t}, &log), &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	return e, proxy, &log
}

// With the default exec protocol (auto) and a proxy in front of the API
// server that refuses every WebSocket upgrade, a lease on the real node
// works over SPDY: it acquires; executes pass argv, env and stdin and give
// output and exit codes; the stream killed at the pod's end while a command
// runs is reopened (over SPDY again) and the command ends with all its
// output; the release answers once the pod is gone. The proxy saw each
// stream open try a WebSocket first (refused) and then switch to SPDY.
// Without the fallback to SPDY no execute runs.
func TestLeaseSPDYFallback(t *testing.T) {
	e, proxy, _ := newProxiedLeaseEnv(t, sandbox.ExecAuto)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	info := e.acquire(ctx, t, sandbox.EnvironmentConfig{EnvAllow: []string{"GREETING"}}, "run-1")
	e.checkExecs(t, info.ID)
	first := proxy.Counts()

	// The stream killed while a command runs: reopened, over SPDY.
	long := make(chan sandbox.ExecResult, 1)
	go func() {
		r, err := e.m.Execute(ctx, sandbox.ExecParams{LeaseID: info.ID, Command: "sh", Args: []string{"-c", "echo before; sleep 3; echo after; exit 7"}}, nil)
		if err != nil {
			t.Errorf("the command the stream carried: %v", err)
		}
		long <- r
	}()
	time.Sleep(time.Second)
	r := e.exec(t, info.ID, sandbox.ExecParams{Command: "sh", Args: []string{"-c", killAttach}})
	if r.Stdout != "killed\n" {
		t.Errorf("the command that killed the stream: stdout %q stderr %q exit %d; want killed", r.Stdout, r.Stderr, code(r))
	}
	select {
	case r = <-long:
	case <-ctx.Done():
		t.Fatal("the long command never ended")
	}
	if r.Stdout != "before\nafter\n" || code(r) != 7 {
		t.Errorf("the command the stream carried: stdout %q stderr %q exit %d; want before, after, 7", r.Stdout, r.Stderr, code(r))
	}
	if r = e.exec(t, info.ID, sandbox.ExecParams{Command: "echo", Args: []string{"still here"}}); r.Stdout != "still here\n" {
		t.Errorf("after the reopen: %q", r.Stdout)
	}
	state, err := e.m.Release(ctx, sandbox.ReleaseParams{ID: info.ID})
	if err != nil || state != sandbox.ReceiptDestroyed {
		t.Fatalf("release: %v %v", state, err)
	}
	if _, err := e.c.Client().CoreV1().Pods(e.ns).Get(ctx, info.ID, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("pod %s after the release's receipt: %v, want not found", info.ID, err)
	}

	got := proxy.Counts()
	t.Logf("proxy: before the kill %v; in all %v", first, got)
	if first.WebSocket < 1 || first.SPDYSwitched < 1 || first.WebSocketRefused != first.WebSocket {
		t.Errorf("the first stream open: %v; want a WebSocket upgrade refused, then SPDY's switched", first)
	}
	if got.WebSocket <= first.WebSocket || got.SPDYSwitched <= first.SPDYSwitched {
		t.Errorf("the reopen: %v after %v; want another WebSocket refused and another SPDY switched", got, first)
	}
}

// With exec protocol spdy, a lease's stream never tries a WebSocket: through
// the refusing proxy, executes run and no request the proxy saw asked for a
// WebSocket upgrade. (With auto, each open's first request does.)
func TestLeaseSPDYForced(t *testing.T) {
	e, proxy, _ := newProxiedLeaseEnv(t, sandbox.ExecSPDY)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	info := e.acquire(ctx, t, sandbox.EnvironmentConfig{}, "")
	stdin := "over spdy\n"
	r := e.exec(t, info.ID, sandbox.ExecParams{Command: "sh", Args: []string{"-c", "cat; exit 5"}, Stdin: &stdin})
	if r.Stdout != stdin || code(r) != 5 {
		t.Errorf("stdout %q exit %d, want %q 5 (stderr %q)", r.Stdout, code(r), stdin, r.Stderr)
	}
	if _, err := e.m.Release(ctx, sandbox.ReleaseParams{ID: info.ID, Cancel: true}); err != nil {
		t.Fatalf("release: %v", err)
	}
	if got := proxy.Counts(); got.WebSocket != 0 || got.SPDYSwitched < 1 {
		t.Errorf("proxy: %v; want no WebSocket upgrade asked for, SPDY's switched", got)
	}
}

// With exec protocol websocket and a proxy that refuses WebSocket upgrades,
// the lease's command stream cannot open: the pod runs (the acquire answers
// then; the stream opens in the background, within the environment's
// timeoutMs), the open fails at once (a 403 is not retried), and the lease
// ends, its pod deleted. The error names the pod, the refusal and the
// protocols that would work; SPDY was never tried; an execute then finds
// no lease.
func TestLeaseWebSocketForcedRefused(t *testing.T) {
	e, proxy, log := newProxiedLeaseEnv(t, sandbox.ExecWebSocket)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	info := e.acquire(ctx, t, sandbox.EnvironmentConfig{TimeoutMs: 10_000}, "")
	// The lease ends: its pod is deleted.
	deadline := time.Now().Add(time.Minute)
	for {
		_, err := e.c.Client().CoreV1().Pods(e.ns).Get(ctx, info.ID, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("pod %s still there a minute after its stream failed: %v", info.ID, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	// The Manager's error, logged when it ended the lease.
	var line string
	for _, l := range strings.Split(log.String(), "\n") {
		if strings.Contains(l, "the command server does not answer; ending the lease") {
			line = l
		}
	}
	for _, want := range []string{"Pod/" + e.ns + "/" + info.ID + ": exec stream ended", "403 Forbidden",
		"the exec protocol is websocket, with no fallback to SPDY", "needs auto or spdy"} {
		if !strings.Contains(line, want) {
			t.Errorf("the Manager's error %q does not say %q", line, want)
		}
	}
	// The lease ends in the background (Ending, then gone): an execute is
	// refused all along, and with ErrNoLease once it has ended.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		r, err := e.m.Execute(ctx, sandbox.ExecParams{LeaseID: info.ID, Command: "true"}, nil)
		if errors.Is(err, sandbox.ErrNoLease) {
			break
		}
		if err == nil || time.Now().After(deadline) {
			t.Errorf("an execute on the ended lease: %+v %v, want ErrNoLease", r, err)
			break
		}
	}
	// A 403 is for good: one refused upgrade, not one per retry until the
	// lease's patience runs out.
	if got := proxy.Counts(); got.WebSocketRefused != 1 || got.SPDY != 0 {
		t.Errorf("proxy: %v; want one WebSocket upgrade refused, not retried, and no SPDY upgrade asked for", got)
	}
}
