package cmdserver

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/pcsync/pcsync/pkg/sandbox/wire"
)

// command is one started command. Its fields are guarded by server.mu.
type command struct {
	id  uint32
	pid int

	// stdout and stderr are the command's output streams.
	stdout, stderr outStream
	// conn is the connection its output goes to; nil while detached.
	conn     *conn
	exitSent bool

	// exited: the main process was reaped (or never started).
	exited bool
	exit   wire.ExitPayload
	// done: exited and both pipes drained; Exit may be sent.
	done     bool
	released bool
	timer    *time.Timer
	// space is signalled when output may fit under MaxBuffer again.
	space *sync.Cond

	stdin stdinQueue
}

// outStream is one output stream of a command: the pipe it is read from,
// the output kept of it and how much of that went to the connection.
type outStream struct {
	// typ is the frame type that carries it (Stdout or Stderr); name is
	// its name in messages.
	typ  wire.Type
	name string
	// pipe is the server's end, nil once drained (or never opened); eof
	// says the reader is done with it.
	pipe *os.File
	eof  bool
	// data holds the kept bytes [base, base+len(data)).
	data []byte
	base int64
	// sent is the offset up to which the output went to the connection.
	sent int64
}

func (o *outStream) end() int64 { return o.base + int64(len(o.data)) }

// trimSent discards the output already written to a connection.
func (o *outStream) trimSent() {
	if n := o.sent - o.base; n > 0 {
		o.data = append([]byte(nil), o.data[n:]...)
		o.base = o.sent
	}
}

// chunk returns the next frame of unsent output of command id and marks
// it sent, or false when all is sent.
func (o *outStream) chunk(id uint32) (wire.Frame, bool) {
	if o.sent >= o.end() {
		return wire.Frame{}, false
	}
	from := o.sent - o.base
	to := min(int64(len(o.data)), from+chunkSize)
	o.sent = o.base + to
	// The slice is not copied: appends never write below len.
	return wire.Frame{Type: o.typ, ID: id, Payload: o.data[from:to:to]}, true
}

// seek makes off the next byte to send; an offset outside the kept bytes
// is moved to their nearest end and reported.
func (o *outStream) seek(id uint32, off, maxBuffer int64) error {
	var err error
	switch {
	case off < o.base:
		err = fmt.Errorf("Attach: %s bytes %d to %d of command %d were discarded (buffer cap %d bytes)", o.name, off, o.base, id, maxBuffer)
		off = o.base
	case off > o.end():
		err = fmt.Errorf("Attach: %s offset %d of command %d is past its output (%d bytes)", o.name, off, id, o.end())
		off = o.end()
	}
	o.sent = off
	return err
}

// stdinQueue is what a client sent for a command's stdin and the writer
// has not written yet.
type stdinQueue struct {
	// on: the command was started with Stdin.
	on     bool
	bufs   [][]byte
	closed bool
	// cond is signalled when bufs grows, stdin closes or the command ends.
	cond *sync.Cond
}

func (s *server) newCommand(id uint32, cn *conn) *command {
	return &command{
		id:     id,
		conn:   cn,
		stdout: outStream{typ: wire.Stdout, name: "stdout"},
		stderr: outStream{typ: wire.Stderr, name: "stderr"},
		space:  sync.NewCond(&s.mu),
		stdin:  stdinQueue{cond: sync.NewCond(&s.mu)},
	}
}

// streams are stdout and stderr, in the order they are sent.
func (c *command) streams() [2]*outStream { return [2]*outStream{&c.stdout, &c.stderr} }

func (c *command) kept() int64 { return int64(len(c.stdout.data) + len(c.stderr.data)) }

// maybeDone marks c done once its main process exited and both pipes are
// drained. s.mu is held.
func (s *server) maybeDone(c *command) {
	if c.done || !c.exited || !c.stdout.eof || !c.stderr.eof {
		return
	}
	c.done = true
	c.stdin.cond.Broadcast()
	if c.released {
		s.forget(c)
		return
	}
	c.markDirty()
}

// release lets the server forget command id once it is done. s.mu is not
// held.
func (s *server) release(id uint32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.cmds[id]
	if c == nil {
		return
	}
	c.released = true
	c.space.Broadcast()
	if c.done {
		s.forget(c)
	}
}

// forget drops a released, done command, and its process group once no
// background process is left in it. s.mu is held.
func (s *server) forget(c *command) {
	delete(s.cmds, c.id)
	c.stdout.data, c.stderr.data = nil, nil
	c.stdout.base, c.stderr.base = 0, 0
	s.groups.dropIfGone(c.pid)
}

// readPipe keeps what the command writes on stream o until the pipe ends
// (or its drain deadline passes).
func (s *server) readPipe(c *command, o *outStream, f *os.File) {
	defer s.wg.Done()
	buf := make([]byte, 32<<10)
	for {
		n, err := f.Read(buf)
		if n > 0 {
			s.appendOut(c, o, buf[:n])
		}
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, os.ErrDeadlineExceeded) {
				s.log.Warn("read command output", slog.Uint64("id", uint64(c.id)), slog.Any("error", err))
			}
			break
		}
	}
	s.mu.Lock()
	o.pipe = nil
	f.Close()
	o.eof = true
	s.maybeDone(c)
	s.mu.Unlock()
}

// appendOut keeps p as c's output on stream o, within MaxBuffer: it waits
// while the kept bytes are all unsent.
func (s *server) appendOut(c *command, o *outStream, p []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for !c.released && !s.closing && c.kept() > 0 && c.kept()+int64(len(p)) > s.opts.MaxBuffer {
		c.stdout.trimSent()
		c.stderr.trimSent()
		if c.kept()+int64(len(p)) <= s.opts.MaxBuffer {
			break
		}
		c.space.Wait()
	}
	if c.released {
		return
	}
	o.data = append(o.data, p...)
	c.markDirty()
}

// queueStdin handles a Stdin (data) or StdinClose (closing) frame for
// command id.
func (s *server) queueStdin(t wire.Type, id uint32, data []byte, closing bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.cmds[id]
	switch {
	case c == nil:
		return fmt.Errorf("%v: unknown command %d", t, id)
	case !c.stdin.on:
		return fmt.Errorf("%v: command %d was started without stdin", t, id)
	case closing:
		c.stdin.closed = true
	case !c.stdin.closed && !c.done && len(data) > 0:
		c.stdin.bufs = append(c.stdin.bufs, data)
	}
	c.stdin.cond.Broadcast()
	return nil
}

// writeStdin writes the queued stdin to the command until stdin is closed
// or the command ends; once the command closed its end, the rest is
// discarded.
func (s *server) writeStdin(c *command, f *os.File) {
	defer s.wg.Done()
	defer f.Close()
	broken := false
	for {
		s.mu.Lock()
		for len(c.stdin.bufs) == 0 && !c.stdin.closed && !c.done && !s.closing {
			c.stdin.cond.Wait()
		}
		if len(c.stdin.bufs) == 0 {
			s.mu.Unlock()
			return
		}
		p := c.stdin.bufs[0]
		c.stdin.bufs = c.stdin.bufs[1:]
		s.mu.Unlock()
		if !broken {
			if _, err := f.Write(p); err != nil {
				broken = true // the command closed its stdin; discard the rest
			}
		}
	}
}

// markDirty queues c on its connection's sender. s.mu is held.
func (c *command) markDirty() {
	cn := c.conn
	if cn == nil || cn.closed || cn.queued[c] {
		return
	}
	cn.queued[c] = true
	cn.queue = append(cn.queue, c)
	cn.wakeUp()
}

// attach makes cn the destination of command id's output from the given
// offsets on. An offset outside the kept output is moved to its nearest
// end and reported in an Error frame (the later stream's wins), queued
// before any of the output so that the client sees it first.
func (s *server) attach(cn *conn, id uint32, stdout, stderr int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.cmds[id]
	if c == nil {
		return fmt.Errorf("Attach: unknown command %d", id)
	}
	c.conn = cn
	c.exitSent = false
	err := c.stdout.seek(id, stdout, s.opts.MaxBuffer)
	if e := c.stderr.seek(id, stderr, s.opts.MaxBuffer); e != nil {
		err = e
	}
	if err != nil {
		cn.ctrl = append(cn.ctrl, wire.JSON(wire.Error, id, wire.ErrorPayload{Message: err.Error()}))
	}
	c.space.Broadcast()
	c.markDirty()
	cn.wakeUp()
	return nil
}
