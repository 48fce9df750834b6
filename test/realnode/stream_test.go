//go:build integration

package realnode

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"k8s.io/klog/v2"

	"github.com/pcsync/pcsync/internal/testing/lockedbuf"
	"github.com/pcsync/pcsync/pkg/sandbox"
)

// killAttach kills (SIGKILL) the lease's `pcsync sandbox-server attach`,
// the process at the pod's end of the lease's exec stream: the stream
// breaks as a lost connection would break it. (The pattern is escaped so
// that the script's own command line does not match it.)
const killAttach = `for p in /proc/[0-9]*; do
	c=$(tr '\0' ' ' <"$p/cmdline" 2>/dev/null) || continue
	case "$c" in *pcsync\ sandbox-server\ attach*) kill -9 "${p#/proc/}" && echo killed;; esac
done`

// The lease's exec stream killed at the pod's end, on a real kubelet, while
// a command runs and by the very command that kills it: the client opens
// the stream again and re-attaches, both commands end with all their output
// and their exit codes, and client-go logs no "Unhandled Error" (the stream's
// end is pcsync's to report, once).
func TestLeaseStreamKilled(t *testing.T) {
	p := pushImages(t)
	e := newLeaseEnv(t, p)
	var klogOut lockedbuf.Buffer
	klog.SetSlogLogger(slog.New(slog.NewTextHandler(&klogOut, nil)))
	t.Cleanup(func() { klog.SetSlogLogger(slog.New(slog.NewTextHandler(testWriter{t}, nil))) })

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	info, err := e.m.Acquire(ctx, sandbox.AcquireParams{Config: sandbox.EnvironmentConfig{Company: e.slug}, AdapterType: "claude_local", AgentID: pinnedAgentID})
	if err != nil {
		t.Fatalf("acquire: %v", err)
	}
	type ended struct {
		r   sandbox.ExecResult
		err error
	}
	long := make(chan ended, 1)
	go func() {
		r, err := e.m.Execute(ctx, sandbox.ExecParams{LeaseID: info.ID, Command: "sh", Args: []string{"-c", "echo before; sleep 3; echo after; exit 7"}}, nil)
		long <- ended{r, err}
	}()
	time.Sleep(time.Second)
	r := e.exec(t, info.ID, sandbox.ExecParams{Command: "sh", Args: []string{"-c", killAttach}})
	if r.Stdout != "killed\n" || code(r) != 0 {
		t.Errorf("the command that killed the stream: stdout %q stderr %q exit %d; want killed, 0", r.Stdout, r.Stderr, code(r))
	}
	select {
	case got := <-long:
		if got.err != nil {
			t.Fatalf("the command the stream carried: %v", got.err)
		}
		r = got.r
	case <-ctx.Done():
		t.Fatal("the long command never ended")
	}
	if r.Stdout != "before\nafter\n" || code(r) != 7 {
		t.Errorf("the command the stream carried: stdout %q stderr %q exit %d; want before, after, 7", r.Stdout, r.Stderr, code(r))
	}
	r = e.exec(t, info.ID, sandbox.ExecParams{Command: "echo", Args: []string{"still here"}})
	if r.Stdout != "still here\n" {
		t.Errorf("after the reopen: %q", r.Stdout)
	}
	if _, err := e.m.Release(ctx, sandbox.ReleaseParams{ID: info.ID, Cancel: true}); err != nil {
		t.Fatalf("release: %v", err)
	}
	if got := klogOut.String(); strings.Contains(got, "Unhandled Error") {
		t.Errorf("client-go logged an Unhandled Error:\n%s", got)
	}
}
