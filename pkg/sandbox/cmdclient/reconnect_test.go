package cmdclient_test

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pcsync/pcsync/pkg/sandbox/cmdclient"
)

// TestCloseInterruptsReconnect: a client closed while it waits to reopen a
// broken stream (an hour's backoff, an hour's ReconnectTimeout) stops
// waiting: Close returns and the running command ends with ErrClosed.
func TestCloseInterruptsReconnect(t *testing.T) {
	s := startServer(t, nil)
	o := &connOpener{socket: s.socket}
	c := newClient(t, o.open, func(opts *cmdclient.Options) {
		opts.Backoff, opts.MaxBackoff, opts.ReconnectTimeout = time.Hour, time.Hour, time.Hour
	})
	p, err := c.Start(cmdclient.Command{Argv: []string{"sleep", "300"}})
	if err != nil {
		t.Fatal(err)
	}
	o.mu.Lock()
	o.fail = true
	o.mu.Unlock()
	o.breakStream()
	time.Sleep(200 * time.Millisecond) // the reader sees the break and begins its first wait
	closed := make(chan struct{})
	go func() {
		c.Close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not interrupt the reconnect's backoff")
	}
	if _, err := p.Wait(execCtx(t)); !errors.Is(err, cmdclient.ErrClosed) {
		t.Errorf("Wait: %v, want ErrClosed", err)
	}
}

// TestReconnectWhileStdinIsSent: a stream that breaks while a command's
// stdin is still being sent fails that command (how much of its stdin
// arrived is unknown) and kills it; a command started after it runs on
// the reopened stream.
func TestReconnectWhileStdinIsSent(t *testing.T) {
	s := startServer(t, nil)
	o := &connOpener{socket: s.socket}
	c := newClient(t, o.open, nil)
	r, w := io.Pipe()
	defer w.Close()
	pidFile := filepath.Join(t.TempDir(), "pid")
	p, err := c.Start(cmdclient.Command{Argv: []string{"sh", "-c", `echo $$ > "$0"; exec cat >/dev/null`, pidFile}, Stdin: r})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte("part of it")); err != nil { // the pump has read it: stdin is open
		t.Fatal(err)
	}
	// The command runs (its shell wrote its pid) before the stream breaks:
	// on a loaded machine the write above can return first.
	var b []byte
	for deadline := time.Now().Add(30 * time.Second); len(b) == 0 || b[len(b)-1] != '\n'; time.Sleep(10 * time.Millisecond) {
		if b, _ = os.ReadFile(pidFile); time.Now().After(deadline) {
			t.Fatalf("the command wrote no pid into %s", pidFile)
		}
	}
	o.breakStream()
	_, err = p.Wait(execCtx(t))
	if err == nil || !strings.Contains(err.Error(), "stream broke while its stdin was being sent") {
		t.Errorf("Wait: %v, want the command failed for its stdin", err)
	}
	waitGone(t, pidOf(t, b))
	got, err := execOut(execCtx(t), c, cmdclient.Command{Argv: []string{"echo", "after"}}, nil)
	if err != nil || string(got.Stdout) != "after\n" {
		t.Errorf("Exec after: %q, %v", got.Stdout, err)
	}
}
