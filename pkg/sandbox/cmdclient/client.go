package cmdclient

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/pcsync/pcsync/pkg/sandbox/wire"
)

// Stats counts a client's streams and commands.
type Stats struct {
	// Opens is how many streams the client opened (one Kubernetes exec
	// each in the daemon): 1 plus one per reconnect attempt.
	Opens int64
	// Running is the number of commands the client is waiting for.
	Running int
}

// ErrClosed is returned by calls on a closed client and by the Execs that
// Close interrupted.
var ErrClosed = errors.New("cmdclient: client closed")

// Client multiplexes commands on one stream to a command server. Its
// methods are safe for concurrent use.
type Client struct {
	open     Opener
	opts     Options
	log      *slog.Logger
	life     context.Context
	lifeStop context.CancelFunc
	opens    atomic.Int64
	runDone  chan struct{}

	// wmu serializes writes and guards rwc and connected. Lock order: wmu,
	// then mu.
	wmu       sync.Mutex
	rwc       io.ReadWriteCloser
	connected bool
	// gen counts the streams the client made its own (guarded by wmu and
	// mu: written under both, read under either).
	gen uint64

	mu        sync.Mutex
	procs     map[uint32]*Process
	pings     map[uint32]chan struct{}
	nextID    uint32
	firstID   uint32
	nextPing  uint32
	serverPID int
	err       error // set once the client is unusable
	shutdown  bool
	bye       chan struct{}
}

// New opens a stream at once (so an unreachable server, or one of another
// protocol version, fails here), says Hello and returns the client. ctx
// bounds only this first open and Hello.
func New(ctx context.Context, open Opener, opts Options) (*Client, error) {
	opts.complete()
	c := &Client{
		open:    open,
		opts:    opts,
		log:     opts.Logger,
		runDone: make(chan struct{}),
		procs:   map[uint32]*Process{},
		pings:   map[uint32]chan struct{}{},
		bye:     make(chan struct{}),
	}
	c.life, c.lifeStop = context.WithCancel(context.Background())
	l, err := c.connect(ctx)
	if err != nil {
		c.lifeStop()
		return nil, err
	}
	c.serverPID = l.hello.PID
	c.nextID = 1
	if n := len(l.hello.Running); n > 0 {
		c.nextID = slices.Max(l.hello.Running) + 1
	}
	c.firstID = c.nextID
	c.rwc, c.connected = l.rwc, true
	go c.run(l)
	return c, nil
}

// finishLocked ends p with exit or err: the client forgets it and its
// Wait returns. c.mu is held.
func (c *Client) finishLocked(p *Process, exit Exit, err error) {
	delete(c.procs, p.id)
	p.exit, p.err = exit, err
	close(p.done)
}

// send writes frames on the current stream; a write error breaks the
// stream (the reader then reconnects).
func (c *Client) send(frames ...wire.Frame) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if !c.connected {
		return errors.New("cmdclient: stream not connected")
	}
	for _, f := range frames {
		if err := wire.Write(c.rwc, f); err != nil {
			c.breakLocked()
			return err
		}
	}
	return nil
}

// breakLocked closes the current stream so that the reader reconnects.
// wmu is held.
func (c *Client) breakLocked() {
	if c.connected {
		c.connected = false
		c.rwc.Close()
	}
}

// failAll makes the client unusable with err (unless it already is) and
// ends every command and Ping with it.
func (c *Client) failAll(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err == nil {
		c.err = err
	}
	for _, p := range c.procs {
		c.finishLocked(p, Exit{}, err)
	}
	for id, ch := range c.pings {
		delete(c.pings, id)
		close(ch)
	}
}

// Start starts cmd and returns at once; its stdin is sent and its output
// written as Command says.
func (c *Client) Start(cmd Command) (*Process, error) {
	if len(cmd.Argv) == 0 {
		return nil, errors.New("cmdclient: empty argv")
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return nil, err
	}
	p := &Process{c: c, id: c.nextID, cmd: cmd, stdinOpen: cmd.Stdin != nil, done: make(chan struct{})}
	c.nextID++
	c.procs[p.id] = p
	c.mu.Unlock()
	if !c.connected {
		return p, nil // resume sends it
	}
	if err := wire.Write(c.rwc, startFrame(p)); err != nil {
		c.breakLocked()
		return p, nil // resume sends it again, or fails it
	}
	c.mu.Lock()
	p.startSent = true
	c.mu.Unlock()
	if cmd.Stdin != nil {
		go c.pumpStdin(p, c.gen)
	}
	return p, nil
}

// Exec runs cmd and waits for it; see Start and Process.Wait. A command
// that could not start is not an error: its Exit has Code 127 or 126 and
// Error set.
func (c *Client) Exec(ctx context.Context, cmd Command) (Exit, error) {
	p, err := c.Start(cmd)
	if err != nil {
		return Exit{}, err
	}
	return p.Wait(ctx)
}

// Signal sends sig (TERM, KILL, INT or HUP) to the process group of
// command id. It fails if the stream is down.
func (c *Client) Signal(ctx context.Context, id uint32, sig string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := c.send(wire.JSON(wire.Signal, id, wire.SignalPayload{Signal: sig})); err != nil {
		return fmt.Errorf("cmdclient: signal %s to command %d: %w", sig, id, err)
	}
	return nil
}

// Ping waits for the server to answer a Ping.
func (c *Client) Ping(ctx context.Context) error {
	ch := make(chan struct{})
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return err
	}
	c.nextPing++
	id := c.nextPing
	c.pings[id] = ch
	c.mu.Unlock()
	if err := c.send(wire.Frame{Type: wire.Ping, ID: id}); err != nil {
		c.mu.Lock()
		delete(c.pings, id)
		c.mu.Unlock()
		return fmt.Errorf("cmdclient: ping: %w", err)
	}
	select {
	case <-ch:
		c.mu.Lock()
		err := c.err
		c.mu.Unlock()
		return err
	case <-ctx.Done():
		c.mu.Lock()
		delete(c.pings, id)
		c.mu.Unlock()
		return ctx.Err()
	}
}

// Shutdown asks the server to SIGKILL every process group it started and
// exit, waits for its Bye (or ctx), then closes the client.
func (c *Client) Shutdown(ctx context.Context) error {
	c.mu.Lock()
	c.shutdown = true
	c.mu.Unlock()
	err := c.send(wire.Frame{Type: wire.Shutdown})
	if err == nil {
		select {
		case <-c.bye:
		case <-c.runDone:
		case <-ctx.Done():
			err = ctx.Err()
		}
	}
	c.Close()
	if err != nil {
		return fmt.Errorf("cmdclient: shutdown: %w", err)
	}
	return nil
}

// Close closes the stream without stopping the server's commands; running
// Execs fail with ErrClosed.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.err == nil {
		c.err = ErrClosed
	}
	c.mu.Unlock()
	c.lifeStop()
	c.wmu.Lock()
	if c.rwc != nil {
		c.rwc.Close()
	}
	c.connected = false
	c.wmu.Unlock()
	<-c.runDone
	c.failAll(ErrClosed)
	return nil
}

// Stats returns the client's counters.
func (c *Client) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return Stats{Opens: c.opens.Load(), Running: len(c.procs)}
}
