package cmdserver

import (
	"bufio"
	"errors"
	"io"
	"log/slog"
	"net"

	"github.com/pcsync/pcsync/pkg/sandbox/wire"
)

// conn is one client connection: a reader that handles the client's
// frames in order, and a sender that writes control frames first, then
// the output and Exit of the commands attached to it.
type conn struct {
	s  *server
	nc net.Conn

	// Guarded by s.mu.
	ctrl   []wire.Frame
	queue  []*command
	queued map[*command]bool
	closed bool
	// bye: the client asked for the Shutdown; Serve lets the Bye out
	// before it closes the connection.
	bye bool
	// last: the sender closes the connection once ctrl is sent (a
	// refused Hello).
	last bool

	wake     chan struct{}
	done     chan struct{}
	sendDone chan struct{}
}

func newConn(s *server, nc net.Conn) *conn {
	return &conn{
		s: s, nc: nc, queued: map[*command]bool{},
		wake: make(chan struct{}, 1), done: make(chan struct{}), sendDone: make(chan struct{}),
	}
}

func (cn *conn) wakeUp() {
	select {
	case cn.wake <- struct{}{}:
	default:
	}
}

// sendCtrl queues a control frame; final makes it the connection's last:
// the sender closes the connection after it.
func (cn *conn) sendCtrl(f wire.Frame, final bool) {
	cn.s.mu.Lock()
	defer cn.s.mu.Unlock()
	cn.ctrl = append(cn.ctrl, f)
	cn.last = cn.last || final
	cn.wakeUp()
}

func (cn *conn) sendError(id uint32, msg string) {
	cn.sendCtrl(wire.JSON(wire.Error, id, wire.ErrorPayload{Message: msg}), false)
}

// closeLocked closes the connection and detaches its commands. s.mu is
// held.
func (cn *conn) closeLocked() {
	if cn.closed {
		return
	}
	cn.closed = true
	close(cn.done)
	cn.nc.Close()
	delete(cn.s.conns, cn)
	for _, c := range cn.s.cmds {
		if c.conn == cn {
			c.conn = nil
			c.space.Broadcast()
		}
	}
}

func (cn *conn) close() {
	cn.s.mu.Lock()
	defer cn.s.mu.Unlock()
	cn.closeLocked()
}

// next returns the next frame to send, or false if there is none now;
// drained says there is none and the connection is to close.
func (cn *conn) next() (f wire.Frame, ok, drained bool) {
	s := cn.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(cn.ctrl) > 0 {
		f := cn.ctrl[0]
		cn.ctrl = cn.ctrl[1:]
		return f, true, false
	}
	if cn.last {
		return wire.Frame{}, false, true
	}
	for len(cn.queue) > 0 {
		c := cn.queue[0]
		cn.queue = cn.queue[1:]
		delete(cn.queued, c)
		if c.conn != cn {
			continue
		}
		for _, o := range c.streams() {
			if f, ok := o.chunk(c.id); ok {
				c.space.Broadcast()
				c.markDirty()
				return f, true, false
			}
		}
		if c.done && !c.exitSent {
			c.exitSent = true
			return wire.JSON(wire.Exit, c.id, c.exit), true, false
		}
	}
	return wire.Frame{}, false, false
}

// sendLoop writes the connection's frames until it closes, a write fails,
// Bye is sent, or its last frame is.
func (cn *conn) sendLoop() {
	defer close(cn.sendDone)
	for {
		f, ok, drained := cn.next()
		if drained {
			cn.close()
			return
		}
		if !ok {
			select {
			case <-cn.wake:
				continue
			case <-cn.done:
				return
			}
		}
		if err := wire.Write(cn.nc, f); err != nil {
			cn.s.log.Debug("connection write failed", slog.Any("error", err))
			cn.close()
			return
		}
		if f.Type == wire.Bye {
			return
		}
	}
}

// readLoop handles the client's frames in order until the stream ends or
// a handler stops it.
func (cn *conn) readLoop() {
	r := wire.NewReader(bufio.NewReaderSize(cn.nc, 64<<10))
	for {
		f, err := r.Read()
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				cn.s.log.Debug("connection read failed", slog.Any("error", err))
			}
			break
		}
		if err := cn.handle(f); err != nil {
			if errors.Is(err, errStopReading) {
				return
			}
			cn.sendError(f.ID, err.Error())
		}
	}
	cn.close()
	cn.s.log.Debug("connection closed")
}
