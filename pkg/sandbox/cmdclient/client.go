// Package cmdclient drives a sandbox command server (package cmdserver)
// over one long-lived byte stream, such as a Kubernetes exec of `pcsync
// sandbox-server attach`. Many Execs run at once on the one stream; when
// the stream breaks, the client opens a new one and re-attaches to every
// running command so that no output is lost or duplicated.
package cmdclient

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pcsync/pcsync/pkg/sandbox/wire"
)

// Opener opens a new byte stream to the server. ctx lives as long as the
// stream: the client cancels it when it closes the stream.
type Opener func(ctx context.Context) (io.ReadWriteCloser, error)

// Options configures a Client.
type Options struct {
	// Backoff is the wait before the first attempt to reopen a broken
	// stream; it doubles per failed attempt up to MaxBackoff.
	Backoff    time.Duration
	MaxBackoff time.Duration
	// ReconnectTimeout is how long the client tries to reopen a broken
	// stream before it fails every running Exec and becomes unusable.
	ReconnectTimeout time.Duration
	// Logger receives structured logs; nil: text to stderr.
	Logger *slog.Logger
	// OnReopen, when set, is called each time a broken stream was reopened
	// and its commands resumed (the daemon's metrics).
	OnReopen func()
}

// DefaultOptions returns the options the daemon uses.
func DefaultOptions() Options {
	return Options{Backoff: 50 * time.Millisecond, MaxBackoff: time.Second, ReconnectTimeout: 30 * time.Second}
}

// Stream names a command's output stream.
type Stream uint8

// The output streams.
const (
	Stdout Stream = 1
	Stderr Stream = 2
)

// String returns "stdout" or "stderr".
func (s Stream) String() string {
	switch s {
	case Stdout:
		return "stdout"
	case Stderr:
		return "stderr"
	}
	return fmt.Sprintf("Stream(%d)", uint8(s))
}

// Command is what Exec runs.
type Command struct {
	// Argv is run as is, without a shell; Argv[0] is looked up in PATH.
	Argv []string
	// Cwd is the working directory; empty: the server's.
	Cwd string
	// Env is the environment: exactly Env, or the server's own
	// environment overlaid with Env when BaseEnv is set.
	Env     map[string]string
	BaseEnv bool
	// Stdin is the command's whole stdin; nil: /dev/null.
	Stdin []byte
	// Timeout > 0 makes the server SIGKILL the command's process group
	// after it (Exit.TimedOut).
	Timeout time.Duration
}

// Exit is how a command ended, with its whole output.
type Exit struct {
	// Code is the exit status: 128+N when killed by signal N, 127 when
	// the executable was not found, 126 when it could not start.
	Code int
	// Signal names the signal that killed the command ("SIGKILL"), or "".
	Signal string
	// TimedOut says the server killed the command at its Timeout.
	TimedOut bool
	// Error says why the command could not start, or "".
	Error string
	// Stdout and Stderr are everything the command wrote.
	Stdout, Stderr []byte
}

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

// Process is a command started by Start.
type Process struct {
	c        *Client
	id       uint32
	cmd      Command
	onOutput func(Stream, []byte)

	// Guarded by c.mu.
	out       [2][]byte
	startSent bool
	abandoned bool
	exit      Exit
	err       error
	done      chan struct{}
}

// New opens a stream at once (so an unreachable server fails here), says
// Hello and returns the client. ctx bounds only this first open and Hello.
func New(ctx context.Context, open Opener, opts Options) (*Client, error) {
	def := DefaultOptions()
	if opts.Backoff <= 0 {
		opts.Backoff = def.Backoff
	}
	if opts.MaxBackoff < opts.Backoff {
		opts.MaxBackoff = max(def.MaxBackoff, opts.Backoff)
	}
	if opts.ReconnectTimeout <= 0 {
		opts.ReconnectTimeout = def.ReconnectTimeout
	}
	c := &Client{
		open:    open,
		opts:    opts,
		log:     opts.Logger,
		runDone: make(chan struct{}),
		procs:   map[uint32]*Process{},
		pings:   map[uint32]chan struct{}{},
		bye:     make(chan struct{}),
	}
	if c.log == nil {
		c.log = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	c.life, c.lifeStop = context.WithCancel(context.Background())
	rwc, r, hello, err := c.connect(ctx)
	if err != nil {
		c.lifeStop()
		return nil, err
	}
	c.serverPID = hello.PID
	c.nextID = 1
	if n := len(hello.Running); n > 0 {
		c.nextID = slices.Max(hello.Running) + 1
	}
	c.firstID = c.nextID
	c.rwc, c.connected = rwc, true
	go c.run(rwc, r)
	return c, nil
}

// stream is an opened stream whose Close also ends its Opener context.
type stream struct {
	io.ReadWriteCloser
	cancel context.CancelFunc
}

func (s *stream) Close() error {
	err := s.ReadWriteCloser.Close()
	s.cancel()
	return err
}

// connect opens a stream and says Hello, within bound.
func (c *Client) connect(bound context.Context) (io.ReadWriteCloser, *wire.Reader, wire.HelloOKPayload, error) {
	var hello wire.HelloOKPayload
	c.opens.Add(1)
	octx, cancel := context.WithCancel(c.life)
	stopCancel := context.AfterFunc(bound, cancel)
	raw, err := c.open(octx)
	if err != nil {
		stopCancel()
		cancel()
		return nil, nil, hello, fmt.Errorf("cmdclient: open stream: %w", err)
	}
	rwc := &stream{ReadWriteCloser: raw, cancel: cancel}
	stopClose := context.AfterFunc(bound, func() { rwc.Close() })
	r := wire.NewReader(bufio.NewReaderSize(rwc, 64<<10))
	err = wire.Write(rwc, wire.JSON(wire.Hello, 0, wire.HelloPayload{Version: wire.Version}))
	var f wire.Frame
	if err == nil {
		f, err = r.Read()
	}
	if err == nil {
		switch f.Type {
		case wire.HelloOK:
			err = f.Decode(&hello)
		case wire.Error:
			var e wire.ErrorPayload
			f.Decode(&e)
			err = fmt.Errorf("server refused Hello: %s", e.Message)
		default:
			err = fmt.Errorf("server answered Hello with %v", f.Type)
		}
	}
	closedEarly := !stopClose()
	stopped := stopCancel()
	if err == nil && (closedEarly || !stopped) {
		err = bound.Err()
	}
	if err != nil {
		rwc.Close()
		return nil, nil, hello, fmt.Errorf("cmdclient: hello: %w", err)
	}
	return rwc, r, hello, nil
}

// run reads the stream and reopens it when it breaks, until the client
// ends.
func (c *Client) run(rwc io.ReadWriteCloser, r *wire.Reader) {
	defer close(c.runDone)
	for {
		err := c.readLoop(r)
		rwc.Close() // unblocks a stuck writer before taking wmu
		c.wmu.Lock()
		c.connected = false
		c.wmu.Unlock()
		c.mu.Lock()
		final := c.err != nil || c.shutdown
		c.mu.Unlock()
		if final || c.life.Err() != nil {
			c.failAll(ErrClosed)
			return
		}
		// One line per break: Info once the stream is back (its commands
		// go on), Error when it is lost (they fail).
		broke, began := err, time.Now()
		rwc, r, err = c.reconnect()
		if err != nil {
			c.log.Error("sandbox stream lost", slog.Any("broke", broke), slog.Any("error", err))
			c.failAll(err)
			return
		}
		c.log.Info("sandbox stream broke and was reopened", slog.Any("error", broke),
			slog.Duration("took", time.Since(began)), slog.Int64("opens", c.opens.Load()))
		if c.opts.OnReopen != nil {
			c.opts.OnReopen()
		}
	}
}

var errBye = errors.New("server said Bye")

func (c *Client) readLoop(r *wire.Reader) error {
	for {
		f, err := r.Read()
		if err != nil {
			return err
		}
		switch f.Type {
		case wire.Stdout, wire.Stderr:
			i := 0
			if f.Type == wire.Stderr {
				i = 1
			}
			c.mu.Lock()
			p := c.procs[f.ID]
			if p == nil || p.abandoned {
				c.mu.Unlock()
				continue
			}
			p.out[i] = append(p.out[i], f.Payload...)
			cb := p.onOutput
			c.mu.Unlock()
			if cb != nil {
				cb(Stream(i+1), f.Payload)
			}
		case wire.Exit:
			var e wire.ExitPayload
			if err := f.Decode(&e); err != nil {
				return err
			}
			c.mu.Lock()
			p := c.procs[f.ID]
			if p != nil {
				delete(c.procs, f.ID)
				p.exit = Exit{Code: e.ExitCode, Signal: e.Signal, TimedOut: e.TimedOut, Error: e.Error, Stdout: p.out[0], Stderr: p.out[1]}
				close(p.done)
			}
			c.mu.Unlock()
			go c.send(wire.Frame{Type: wire.Release, ID: f.ID})
		case wire.Error:
			var e wire.ErrorPayload
			f.Decode(&e)
			c.mu.Lock()
			p := c.procs[f.ID]
			if p == nil || f.ID == 0 {
				c.mu.Unlock()
				c.log.Warn("sandbox server error", slog.Uint64("id", uint64(f.ID)), slog.String("message", e.Message))
				continue
			}
			delete(c.procs, f.ID)
			p.err = fmt.Errorf("cmdclient: command %d: server: %s", f.ID, e.Message)
			close(p.done)
			c.mu.Unlock()
			go c.send(killFrame(f.ID), wire.Frame{Type: wire.Release, ID: f.ID})
		case wire.Pong:
			c.mu.Lock()
			if ch := c.pings[f.ID]; ch != nil {
				delete(c.pings, f.ID)
				close(ch)
			}
			c.mu.Unlock()
		case wire.Bye:
			c.mu.Lock()
			c.shutdown = true
			c.mu.Unlock()
			close(c.bye)
			return errBye
		default:
			c.log.Debug("ignored frame", slog.String("type", f.Type.String()))
		}
	}
}

func killFrame(id uint32) wire.Frame {
	return wire.JSON(wire.Signal, id, wire.SignalPayload{Signal: "KILL"})
}

// reconnect reopens the stream with backoff and resumes every command.
func (c *Client) reconnect() (io.ReadWriteCloser, *wire.Reader, error) {
	deadline := time.Now().Add(c.opts.ReconnectTimeout)
	backoff := c.opts.Backoff
	var lastErr error
	for {
		select {
		case <-c.life.Done():
			return nil, nil, ErrClosed
		case <-time.After(backoff):
		}
		bound, cancel := context.WithDeadline(c.life, deadline)
		rwc, r, hello, err := c.connect(bound)
		cancel()
		if err == nil {
			if err = c.resume(rwc, hello); err == nil {
				return rwc, r, nil
			}
			rwc.Close()
		}
		lastErr = err
		if c.life.Err() != nil {
			return nil, nil, ErrClosed
		}
		if !time.Now().Before(deadline) {
			return nil, nil, fmt.Errorf("cmdclient: stream broke and could not be reopened within %v: %w", c.opts.ReconnectTimeout, lastErr)
		}
		backoff = min(backoff*2, c.opts.MaxBackoff)
	}
}

// resume makes rwc the client's stream: it re-attaches every started
// command at the offsets already delivered, sends the Starts the server
// never got, and kills what was abandoned.
func (c *Client) resume(rwc io.ReadWriteCloser, hello wire.HelloOKPayload) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	var frames []wire.Frame
	c.mu.Lock()
	if hello.PID != c.serverPID {
		for id, p := range c.procs {
			delete(c.procs, id)
			p.err = fmt.Errorf("cmdclient: command %d lost: the sandbox server restarted (pid %d, was %d)", id, hello.PID, c.serverPID)
			close(p.done)
		}
		c.serverPID = hello.PID
	}
	running := map[uint32]bool{}
	for _, id := range hello.Running {
		running[id] = true
		if c.procs[id] == nil && id >= c.firstID && id < c.nextID {
			// Ended (or abandoned) while the stream was down, or a Release lost.
			frames = append(frames, wire.Frame{Type: wire.Release, ID: id})
		}
		c.nextID = max(c.nextID, id+1)
	}
	ids := make([]uint32, 0, len(c.procs))
	for id := range c.procs {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	var started []*Process
	for _, id := range ids {
		p := c.procs[id]
		switch {
		case p.abandoned:
			delete(c.procs, id)
			if running[id] {
				frames = append(frames, killFrame(id), wire.Frame{Type: wire.Release, ID: id})
			}
		case !p.startSent && !running[id]:
			frames = append(frames, startFrames(p)...)
			started = append(started, p)
		case !p.startSent:
			// The stream broke while sending its stdin: how much arrived is unknown.
			delete(c.procs, id)
			p.err = fmt.Errorf("cmdclient: command %d: stream broke while it was being started", id)
			close(p.done)
			frames = append(frames, killFrame(id), wire.Frame{Type: wire.Release, ID: id})
		case running[id]:
			frames = append(frames, wire.JSON(wire.Attach, id, wire.AttachPayload{Stdout: int64(len(p.out[0])), Stderr: int64(len(p.out[1]))}))
		default:
			delete(c.procs, id)
			p.err = fmt.Errorf("cmdclient: command %d lost: the sandbox server no longer knows it", id)
			close(p.done)
		}
	}
	c.mu.Unlock()
	for _, f := range frames {
		if err := wire.Write(rwc, f); err != nil {
			return fmt.Errorf("cmdclient: resume: %w", err)
		}
	}
	c.mu.Lock()
	for _, p := range started {
		p.startSent = true
	}
	c.mu.Unlock()
	c.rwc, c.connected = rwc, true
	return nil
}

// startFrames are Start, then the stdin and StdinClose if any.
func startFrames(p *Process) []wire.Frame {
	cmd := p.cmd
	fs := []wire.Frame{wire.JSON(wire.Start, p.id, wire.StartPayload{
		Argv: cmd.Argv, Cwd: cmd.Cwd, Env: cmd.Env, BaseEnv: cmd.BaseEnv,
		TimeoutMs: cmd.Timeout.Milliseconds(), Stdin: cmd.Stdin != nil,
	})}
	if cmd.Stdin == nil {
		return fs
	}
	for in := cmd.Stdin; len(in) > 0; {
		n := min(len(in), wire.MaxPayload)
		fs = append(fs, wire.Frame{Type: wire.Stdin, ID: p.id, Payload: in[:n]})
		in = in[n:]
	}
	return append(fs, wire.Frame{Type: wire.StdinClose, ID: p.id})
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

func (c *Client) failAll(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err == nil {
		c.err = err
	}
	for id, p := range c.procs {
		delete(c.procs, id)
		if !p.abandoned {
			p.err = err
			close(p.done)
		}
	}
	for id, ch := range c.pings {
		delete(c.pings, id)
		close(ch)
	}
}

// Start starts cmd and returns at once. onOutput, if not nil, is called
// with each chunk of output as it arrives, in order per stream, from the
// client's reader goroutine: keep it fast.
func (c *Client) Start(cmd Command, onOutput func(Stream, []byte)) (*Process, error) {
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
	p := &Process{c: c, id: c.nextID, cmd: cmd, onOutput: onOutput, done: make(chan struct{})}
	c.nextID++
	c.procs[p.id] = p
	c.mu.Unlock()
	if !c.connected {
		return p, nil // resume sends it
	}
	for _, f := range startFrames(p) {
		if err := wire.Write(c.rwc, f); err != nil {
			c.breakLocked()
			return p, nil // resume sends it again, or fails it
		}
	}
	c.mu.Lock()
	p.startSent = true
	c.mu.Unlock()
	return p, nil
}

// Exec runs cmd and waits for it; see Start and Process.Wait. A command
// that could not start is not an error: its Exit has Code 127 or 126 and
// Error set.
func (c *Client) Exec(ctx context.Context, cmd Command, onOutput func(Stream, []byte)) (Exit, error) {
	p, err := c.Start(cmd, onOutput)
	if err != nil {
		return Exit{}, err
	}
	return p.Wait(ctx)
}

// ID is the command's id on the server.
func (p *Process) ID() uint32 { return p.id }

// Wait waits for the command to end and returns its Exit. If ctx ends
// first, Wait SIGKILLs the command's process group, stops collecting its
// output and returns ctx's error at once.
func (p *Process) Wait(ctx context.Context) (Exit, error) {
	select {
	case <-p.done:
		return p.exit, p.err
	case <-ctx.Done():
	}
	c := p.c
	c.mu.Lock()
	select {
	case <-p.done:
		c.mu.Unlock()
		return p.exit, p.err
	default:
	}
	p.abandoned = true
	c.mu.Unlock()
	go func() {
		if c.send(killFrame(p.id), wire.Frame{Type: wire.Release, ID: p.id}) == nil {
			c.mu.Lock()
			if c.procs[p.id] == p {
				delete(c.procs, p.id)
			}
			c.mu.Unlock()
		} // else resume kills it on the next stream
	}()
	return Exit{}, ctx.Err()
}

// Signal sends sig (TERM, KILL, INT or HUP) to the command's process group.
func (p *Process) Signal(ctx context.Context, sig string) error {
	return p.c.Signal(ctx, p.id, sig)
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
