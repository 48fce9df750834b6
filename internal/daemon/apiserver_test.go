package daemon

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/pcsync/pcsync/pkg/health"
)

// TestProbeAPIServer: APIServerReachable follows the API server's /readyz:
// true while it answers, false saying "API server unreachable" while it
// does not (here: it fails its checks, then its port is closed), true again
// once it answers.
func TestProbeAPIServer(t *testing.T) {
	var failing atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/readyz" {
			http.NotFound(w, r)
			return
		}
		if failing.Load() {
			http.Error(w, "[-]etcd failed: reason withheld\nreadyz check failed", http.StatusInternalServerError)
			return
		}
		_, _ = io.WriteString(w, "ok")
	}))
	defer srv.Close()
	cs, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	d := &daemon{opts: Options{Health: health.NewChecker()}, log: slog.New(slog.DiscardHandler)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); d.probeAPIServer(ctx, cs.Discovery().RESTClient(), 10*time.Millisecond) }()
	defer func() { cancel(); <-done }()

	wait := func(what string, ok func(health.Condition) bool) health.Condition {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			for _, c := range d.opts.Health.Report().Conditions {
				if c.Type == CondAPIServerReachable && ok(c) {
					return c
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("gave up waiting for %s: %+v", what, d.opts.Health.Report())
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	isTrue := func(c health.Condition) bool { return c.Status == health.StatusTrue }
	isFalse := func(c health.Condition) bool { return c.Status == health.StatusFalse }

	wait("reachable", isTrue)
	failing.Store(true)
	c := wait("not ready", isFalse)
	if !strings.Contains(c.Message, "API server unreachable") || !strings.Contains(c.Message, "[-]etcd failed") || c.Gating {
		t.Errorf("while /readyz fails: %+v, want a non-gating condition saying \"API server unreachable\" with the failed check", c)
	}
	failing.Store(false)
	wait("reachable again", isTrue)
	// The listener first: a probe that connects between the two would
	// otherwise keep a live keep-alive connection that answers "ok".
	srv.Listener.Close()
	srv.CloseClientConnections()
	c = wait("unreachable", isFalse)
	if !strings.Contains(c.Message, "API server unreachable") || c.Reason != "Unreachable" {
		t.Errorf("with the port closed: %+v, want reason Unreachable saying \"API server unreachable\"", c)
	}
}
