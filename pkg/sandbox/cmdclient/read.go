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

// gotOutput keeps a chunk of a command's output and hands it to the
// command's onOutput.
func (c *Client) gotOutput(f wire.Frame) error {
	s := Stdout
	if f.Type == wire.Stderr {
		s = Stderr
	}
	c.mu.Lock()
	p := c.procs[f.ID]
	if p == nil || p.abandoned {
		c.mu.Unlock()
		return nil
	}
	out := p.output(s)
	*out = append(*out, f.Payload...)
	cb := p.onOutput
	c.mu.Unlock()
	if cb != nil {
		cb(s, f.Payload)
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
		c.finishLocked(p, Exit{Code: e.ExitCode, Signal: e.Signal, TimedOut: e.TimedOut, Error: e.Error, Stdout: p.stdout, Stderr: p.stderr}, nil)
	}
	c.mu.Unlock()
	go c.send(releaseFrame(f.ID))
	return nil
}

// gotError fails the command the Error is about (and kills and releases
// it on the server), or logs an Error about none.
func (c *Client) gotError(f wire.Frame) error {
	var e wire.ErrorPayload
	f.Decode(&e)
	c.mu.Lock()
	p := c.procs[f.ID]
	if p == nil || f.ID == 0 {
		c.mu.Unlock()
		c.log.Warn("sandbox server error", slog.Uint64("id", uint64(f.ID)), slog.String("message", e.Message))
		return nil
	}
	c.finishLocked(p, Exit{}, fmt.Errorf("cmdclient: command %d: server: %s", f.ID, e.Message))
	c.mu.Unlock()
	go c.send(killFrame(f.ID), releaseFrame(f.ID))
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
