package cmdclient_test

import (
	"errors"
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
