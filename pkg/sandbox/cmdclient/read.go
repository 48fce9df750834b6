package cmdclient

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/pcsync/pcsync/pkg/sandbox/wire"
)

// frameHandler handles one frame the server sent; an error ends the
// stream.
type frameHandler func(c *Client, f wire.Frame) error

// frameHandlers are the frame types the client reads; others are
// ignored.
var frameHandlers = map[wire.Type]frameHandler{
	wire.Stdout: (*Client).gotOutput,
	wire.Stderr: (*Client).gotOutput,
	wire.Exit:   (*Client).gotExit,
	wire.Error:  (*Client).gotError,
	wire.Pong:   (*Client).gotPong,
	wire.Bye:    (*Client).gotBye,
}

var errBye = errors.New("server said Bye")

// readLoop handles the server's frames until the stream ends.
func (c *Client) readLoop(r *wire.Reader) error {
	for {
		f, err := r.Read()
		if err != nil {
			return err
		}
		h, ok := frameHandlers[f.Type]
		if !ok {
			c.log.Debug("ignored frame", slog.String("type", f.Type.String()))
			continue
		}
		if err := h(c, f); err != nil {
			return err
		}
	}
}

// gotOutput writes a chunk of a command's output to the command's Stdout
// or Stderr, and counts it.
func (c *Client) gotOutput(f wire.Frame) error {
	c.mu.Lock()
	p := c.procs[f.ID]
	c.mu.Unlock()
	if p == nil {
		return nil
	}
	p.outMu.Lock()
	defer p.outMu.Unlock()
	c.mu.Lock()
	if c.procs[f.ID] != p || p.abandoned {
		c.mu.Unlock()
		return nil
	}
	w, n, name := p.cmd.Stdout, &p.stdout, "stdout"
	if f.Type == wire.Stderr {
		w, n, name = p.cmd.Stderr, &p.stderr, "stderr"
	}
	*n += int64(len(f.Payload))
	c.mu.Unlock()
	if w == nil {
		return nil
	}
	if _, err := w.Write(f.Payload); err != nil {
		c.failProcess(p, fmt.Errorf("cmdclient: command %d: write %s: %w", p.id, name, err))
	}
	return nil
}

// gotExit ends a command with its Exit and releases it on the server.
func (c *Client) gotExit(f wire.Frame) error {
	var e wire.ExitPayload
	if err := f.Decode(&e); err != nil {
		return err
	}
	c.mu.Lock()
	if p := c.procs[f.ID]; p != nil {
		c.finishLocked(p, Exit{Code: e.ExitCode, Signal: e.Signal, TimedOut: e.TimedOut, Error: e.Error}, nil)
	}
	c.mu.Unlock()
	go func() { _ = c.send(releaseFrame(f.ID)) }() // best effort: a lost stream drops the command anyway
	return nil
}

// gotError fails the command the Error is about (and kills and releases
// it on the server), or logs an Error about none.
func (c *Client) gotError(f wire.Frame) error {
	var e wire.ErrorPayload
	_ = f.Decode(&e) // an undecodable payload leaves the message empty
	c.mu.Lock()
	p := c.procs[f.ID]
	if p == nil || f.ID == 0 {
		c.mu.Unlock()
		c.log.Warn("sandbox server error", slog.Uint64("id", uint64(f.ID)), slog.String("message", e.Message))
		return nil
	}
	c.finishLocked(p, Exit{}, fmt.Errorf("cmdclient: command %d: server: %s", f.ID, e.Message))
	c.mu.Unlock()
	go func() { _ = c.send(killFrame(f.ID), releaseFrame(f.ID)) }() // best effort, as above
	return nil
}

// gotPong wakes the Ping it answers.
func (c *Client) gotPong(f wire.Frame) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ch := c.pings[f.ID]; ch != nil {
		delete(c.pings, f.ID)
		close(ch)
	}
	return nil
}

// gotBye ends the stream for good: the server is shutting down.
func (c *Client) gotBye(wire.Frame) error {
	c.mu.Lock()
	c.shutdown = true
	c.mu.Unlock()
	close(c.bye)
	return errBye
}
