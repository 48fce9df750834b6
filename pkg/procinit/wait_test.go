package procinit

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// closedPort is a loopback address where nothing listens.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return addr
}

// TestWaitProxy: the command starts only once the proxy accepts a
// connection (a proxy scaled up from zero starts after the run's pod), and
// init says it waited only when it did; a proxy that never answers ends
// init with ExitProxyUnavailable, the command not started; a SIGTERM
// during the wait ends it at once. With a grace (a proxy that is up, a pod
// whose egress rules may come a moment late), the command starts at the
// first answer, or at the grace's end without one.
func TestWaitProxy(t *testing.T) {
	tests := []struct {
		name     string
		listenIn time.Duration // -1: never
		timeout  string
		grace    string
		signal   bool
		want     int
		waited   bool
		said     string
	}{
		{name: "proxy up", listenIn: 0, want: 0},
		{name: "proxy starts after the pod", listenIn: 700 * time.Millisecond, want: 0, waited: true},
		{name: "proxy never answers", listenIn: -1, timeout: "400ms", want: ExitProxyUnavailable, waited: true,
			said: "did not answer within 400ms: the agent was not started"},
		{name: "SIGTERM while waiting", listenIn: -1, signal: true, want: 143, waited: true},
		{name: "grace, proxy up", listenIn: 0, grace: "5s", want: 0},
		{name: "grace, proxy answers late", listenIn: 700 * time.Millisecond, grace: "5s", want: 0, waited: true,
			said: "answered after"},
		{name: "grace, proxy never answers", listenIn: -1, grace: "400ms", want: 0, waited: true,
			said: "did not answer within 400ms; starting the agent anyway"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			addr := closedPort(t)
			listen := func() {
				l, err := net.Listen("tcp", addr)
				if err != nil {
					t.Error(err)
					return
				}
				t.Cleanup(func() { _ = l.Close() })
			}
			if tt.listenIn == 0 {
				listen()
			}
			ran := filepath.Join(dir, "ran")
			env := []string{"PROCINIT_TEST_WAIT_PROXY=http://" + addr, "PROCINIT_TEST_WAIT_TIMEOUT=" + tt.timeout,
				"PROCINIT_TEST_PROXY_GRACE=" + tt.grace}
			began := time.Now()
			cmd, out := startInitEnv(t, dir, env, "touch", ran)
			if tt.listenIn > 0 {
				time.AfterFunc(tt.listenIn, listen)
			}
			if tt.signal {
				time.Sleep(300 * time.Millisecond)
				if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
					t.Fatal(err)
				}
			}
			if code := exitStatus(t, cmd.Wait()); code != tt.want {
				t.Fatalf("exit status %d, want %d (output %q)", code, tt.want, out)
			}
			_, err := os.Stat(ran)
			if started := err == nil; started != (tt.want == 0) {
				t.Errorf("command started: %v, want %v (output %q)", started, tt.want == 0, out)
			}
			if waited := strings.Contains(out.String(), "waiting for the egress proxy at "+addr); waited != tt.waited {
				t.Errorf("said it waited: %v, want %v (output %q)", waited, tt.waited, out)
			}
			if tt.want == 0 && tt.listenIn > 0 {
				if rec := readRecord(t, dir); rec.StartedAt.Before(began.Add(tt.listenIn)) {
					t.Errorf("the command's start %s is before the proxy answered (%s after %s)", rec.StartedAt, tt.listenIn, began)
				}
			}
			if !strings.Contains(out.String(), tt.said) {
				t.Errorf("output %q does not say %q", out, tt.said)
			}
		})
	}
}
