package cmdclient

import (
	"errors"
	"fmt"
	"io"

	"github.com/pcsync/pcsync/pkg/sandbox/wire"
)

// stdinChunk is the most one Stdin frame carries: the client holds one
// such buffer per command whose stdin is being sent.
const stdinChunk = wire.MaxPayload

// pumpStdin sends p's stdin as it is read, on the stream of generation
// gen, then StdinClose at its EOF. It stops once the command ended, or the
// stream broke (resume then fails the command: how much of its stdin
// arrived is unknown); a read error fails the command.
func (c *Client) pumpStdin(p *Process, gen uint64) {
	buf := make([]byte, stdinChunk)
	for {
		n, err := p.cmd.Stdin.Read(buf)
		if n > 0 && !c.sendStdin(p, gen, wire.Frame{Type: wire.Stdin, ID: p.id, Payload: buf[:n]}) {
			return
		}
		switch {
		case errors.Is(err, io.EOF):
			c.sendStdin(p, gen, wire.Frame{Type: wire.StdinClose, ID: p.id})
			return
		case err != nil:
			c.failProcess(p, fmt.Errorf("cmdclient: command %d: read stdin: %w", p.id, err))
			return
		}
	}
}

// sendStdin writes f, a Stdin or StdinClose frame of p, if p still runs
// on the stream of generation gen; a StdinClose ends p's stdinOpen. It
// reports whether the frame went out.
func (c *Client) sendStdin(p *Process, gen uint64, f wire.Frame) bool {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.mu.Lock()
	live := c.procs[p.id] == p && !p.abandoned && c.gen == gen
	c.mu.Unlock()
	if !live || !c.connected {
		return false
	}
	if err := wire.Write(c.rwc, f); err != nil {
		c.breakLocked()
		return false
	}
	if f.Type == wire.StdinClose {
		c.mu.Lock()
		p.stdinOpen = false
		c.mu.Unlock()
	}
	return true
}

// failProcess ends p with err, unless it already ended, and kills and
// releases it on the server.
func (c *Client) failProcess(p *Process, err error) {
	c.mu.Lock()
	if c.procs[p.id] != p {
		c.mu.Unlock()
		return
	}
	c.finishLocked(p, Exit{}, err)
	c.mu.Unlock()
	go func() { _ = c.send(killFrame(p.id), releaseFrame(p.id)) }() // best effort: a lost stream drops the command anyway
}
