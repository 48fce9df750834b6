package cmdclient

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/pcsync/pcsync/pkg/sandbox/wire"
)

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

// link is an opened stream on which the server answered Hello.
type link struct {
	rwc   io.ReadWriteCloser
	r     *wire.Reader
	hello wire.HelloOKPayload
}

// connect opens a stream and says Hello, within bound.
func (c *Client) connect(bound context.Context) (*link, error) {
	c.opens.Add(1)
	octx, cancel := context.WithCancel(c.life)
	stopCancel := context.AfterFunc(bound, cancel)
	raw, err := c.open(octx)
	if err != nil {
		stopCancel()
		cancel()
		return nil, fmt.Errorf("cmdclient: open stream: %w", err)
	}
	l := &link{rwc: &stream{ReadWriteCloser: raw, cancel: cancel}}
	stopClose := context.AfterFunc(bound, func() { l.rwc.Close() })
	l.r = wire.NewReader(bufio.NewReaderSize(l.rwc, 64<<10))
	l.hello, err = sayHello(l.rwc, l.r)
	closedEarly := !stopClose()
	stopped := stopCancel()
	if err == nil && (closedEarly || !stopped) {
		err = bound.Err()
	}
	if err != nil {
		l.rwc.Close()
		return nil, fmt.Errorf("cmdclient: hello: %w", err)
	}
	return l, nil
}

// sayHello sends Hello and reads the server's answer: its HelloOK, if it
// speaks the client's protocol version.
func sayHello(w io.Writer, r *wire.Reader) (wire.HelloOKPayload, error) {
	var hello wire.HelloOKPayload
	if err := wire.Write(w, wire.JSON(wire.Hello, 0, wire.HelloPayload{Version: wire.Version})); err != nil {
		return hello, err
	}
	f, err := r.Read()
	if err != nil {
		return hello, err
	}
	switch f.Type {
	case wire.HelloOK:
		if err := f.Decode(&hello); err != nil {
			return hello, err
		}
		if hello.Version != wire.Version {
			return hello, fmt.Errorf("the server speaks protocol version %d, this client %d: refused", hello.Version, wire.Version)
		}
		return hello, nil
	case wire.Error:
		var e wire.ErrorPayload
		_ = f.Decode(&e) // an undecodable payload leaves the message empty
		return hello, fmt.Errorf("server refused Hello: %s", e.Message)
	default:
		return hello, fmt.Errorf("server answered Hello with %v", f.Type)
	}
}

// run reads the stream and reopens it when it breaks, until the client
// ends.
func (c *Client) run(l *link) {
	defer close(c.runDone)
	for {
		err := c.readLoop(l.r)
		l.rwc.Close() // unblocks a stuck writer before taking wmu
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
		l, err = c.reconnect()
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

// reconnect reopens the stream with backoff (Options.reconnectBackoff, the
// first wait before the first attempt) and resumes every command, until
// ReconnectTimeout has passed or the client ends.
func (c *Client) reconnect() (*link, error) {
	deadline := time.Now().Add(c.opts.ReconnectTimeout)
	var l *link
	err := c.opts.reconnectBackoff().DelayFunc().Until(c.life, false, true, func(context.Context) (bool, error) {
		bound, cancel := context.WithDeadline(c.life, deadline)
		var err error
		l, err = c.connect(bound)
		cancel()
		if err == nil {
			if err = c.resume(l); err == nil {
				return true, nil
			}
			l.rwc.Close()
		}
		if c.life.Err() != nil {
			return false, ErrClosed
		}
		if !time.Now().Before(deadline) {
			return false, fmt.Errorf("cmdclient: stream broke and could not be reopened within %v: %w", c.opts.ReconnectTimeout, err)
		}
		return false, nil
	})
	switch {
	case err == nil:
		return l, nil
	case c.life.Err() != nil:
		return nil, ErrClosed
	}
	return nil, err
}

// resume makes l the client's stream: it re-attaches every started
// command at the offsets already delivered, sends the Starts the server
// never got, and kills what was abandoned.
func (c *Client) resume(l *link) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.mu.Lock()
	frames, started := c.resumeLocked(l.hello)
	c.mu.Unlock()
	for _, f := range frames {
		if err := wire.Write(l.rwc, f); err != nil {
			return fmt.Errorf("cmdclient: resume: %w", err)
		}
	}
	c.mu.Lock()
	for _, p := range started {
		p.startSent = true
	}
	c.rwc, c.connected = l.rwc, true
	c.gen++
	c.mu.Unlock()
	for _, p := range started {
		if p.cmd.Stdin != nil {
			go c.pumpStdin(p, c.gen)
		}
	}
	return nil
}

// resumeLocked decides, from the server's HelloOK, what becomes of each
// command: it returns the frames to send and the commands whose Start
// they carry. c.mu is held.
func (c *Client) resumeLocked(hello wire.HelloOKPayload) ([]wire.Frame, []*Process) {
	if hello.PID != c.serverPID {
		for id, p := range c.procs {
			c.finishLocked(p, Exit{}, fmt.Errorf("cmdclient: command %d lost: the sandbox server restarted (pid %d, was %d)", id, hello.PID, c.serverPID))
		}
		c.serverPID = hello.PID
	}
	var frames []wire.Frame
	running := map[uint32]bool{}
	for _, id := range hello.Running {
		running[id] = true
		if c.procs[id] == nil && id >= c.firstID && id < c.nextID {
			// Ended (or abandoned) while the stream was down, or a Release lost.
			frames = append(frames, releaseFrame(id))
		}
		c.nextID = max(c.nextID, id+1)
	}
	var started []*Process
	for _, id := range slices.Sorted(maps.Keys(c.procs)) {
		p := c.procs[id]
		switch {
		case p.abandoned:
			delete(c.procs, id)
			if running[id] {
				frames = append(frames, killFrame(id), releaseFrame(id))
			}
		case !p.startSent && !running[id]:
			frames = append(frames, startFrame(p))
			started = append(started, p)
		case !p.startSent:
			// The stream broke while sending its Start.
			c.finishLocked(p, Exit{}, fmt.Errorf("cmdclient: command %d: stream broke while it was being started", id))
			frames = append(frames, killFrame(id), releaseFrame(id))
		case p.stdinOpen:
			// The stream broke while sending its stdin: how much arrived is unknown.
			c.finishLocked(p, Exit{}, fmt.Errorf("cmdclient: command %d: stream broke while its stdin was being sent", id))
			if running[id] {
				frames = append(frames, killFrame(id), releaseFrame(id))
			}
		case running[id]:
			frames = append(frames, wire.JSON(wire.Attach, id, wire.AttachPayload{Stdout: p.stdout, Stderr: p.stderr}))
		default:
			c.finishLocked(p, Exit{}, fmt.Errorf("cmdclient: command %d lost: the sandbox server no longer knows it", id))
		}
	}
	return frames, started
}
