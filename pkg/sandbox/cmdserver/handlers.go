package cmdserver

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/pcsync/pcsync/pkg/sandbox/wire"
)

// handler serves one frame a client sent on cn. An error is answered with
// an Error frame for the frame's id, but errStopReading, which ends the
// connection's reader.
type handler func(cn *conn, f wire.Frame) error

// errStopReading says the connection reads no more frames: the client
// asked for the Shutdown, or its Hello was refused.
var errStopReading = errors.New("stop reading")

// handlers are the frame types a client may send.
var handlers = map[wire.Type]handler{
	wire.Hello:      (*conn).hello,
	wire.Start:      (*conn).startCommand,
	wire.Stdin:      (*conn).stdin,
	wire.StdinClose: (*conn).stdin,
	wire.Signal:     (*conn).signal,
	wire.Attach:     (*conn).attach,
	wire.Release:    (*conn).release,
	wire.Ping:       (*conn).ping,
	wire.Shutdown:   (*conn).shutdown,
}

// handle serves one frame with its type's handler.
func (cn *conn) handle(f wire.Frame) error {
	h, ok := handlers[f.Type]
	if !ok {
		return fmt.Errorf("unexpected frame type %v", f.Type)
	}
	return h(cn, f)
}

// hello answers HelloOK with the server's pid and the commands it holds,
// or refuses a client of another protocol version: an Error (id 0) that
// says both versions, then the connection closes.
func (cn *conn) hello(f wire.Frame) error {
	var p wire.HelloPayload
	err := f.Decode(&p)
	if err == nil && p.Version != wire.Version {
		err = fmt.Errorf("Hello: the client speaks protocol version %d, this server %d: refused", p.Version, wire.Version)
	}
	if err != nil {
		cn.sendCtrl(wire.JSON(wire.Error, 0, wire.ErrorPayload{Message: err.Error()}), true)
		cn.s.log.Warn("refused a client's Hello", slog.Any("error", err))
		return errStopReading
	}
	s := cn.s
	s.mu.Lock()
	running := make([]uint32, 0, len(s.cmds))
	for id := range s.cmds {
		running = append(running, id)
	}
	s.mu.Unlock()
	slices.Sort(running)
	cn.sendCtrl(wire.JSON(wire.HelloOK, 0, wire.HelloOKPayload{Version: wire.Version, PID: os.Getpid(), Running: running}), false)
	return nil
}

func (cn *conn) startCommand(f wire.Frame) error {
	var p wire.StartPayload
	if err := f.Decode(&p); err != nil {
		return err
	}
	return cn.s.start(cn, f.ID, p)
}

func (cn *conn) stdin(f wire.Frame) error {
	return cn.s.queueStdin(f.Type, f.ID, f.Payload, f.Type == wire.StdinClose)
}

// signals are the signals a client may send, by name without "SIG".
var signals = map[string]unix.Signal{"TERM": unix.SIGTERM, "KILL": unix.SIGKILL, "INT": unix.SIGINT, "HUP": unix.SIGHUP}

func (cn *conn) signal(f wire.Frame) error {
	var p wire.SignalPayload
	if err := f.Decode(&p); err != nil {
		return err
	}
	sig, ok := signals[strings.TrimPrefix(p.Signal, "SIG")]
	if !ok {
		return fmt.Errorf("signal %q: want TERM, KILL, INT or HUP", p.Signal)
	}
	s := cn.s
	s.mu.Lock()
	c := s.cmds[f.ID]
	pid := 0
	if c != nil {
		pid = c.pid
	}
	s.mu.Unlock()
	if c == nil {
		return fmt.Errorf("Signal: unknown command %d", f.ID)
	}
	if pid > 0 {
		_ = unix.Kill(-pid, sig) // the group may have ended
	}
	return nil
}

func (cn *conn) attach(f wire.Frame) error {
	var p wire.AttachPayload
	if err := f.Decode(&p); err != nil {
		return err
	}
	return cn.s.attach(cn, f.ID, p.Stdout, p.Stderr)
}

func (cn *conn) release(f wire.Frame) error {
	cn.s.release(f.ID)
	return nil
}

func (cn *conn) ping(f wire.Frame) error {
	cn.sendCtrl(wire.Frame{Type: wire.Pong, ID: f.ID}, false)
	return nil
}

// shutdown kills every process group, queues Bye and stops the server.
func (cn *conn) shutdown(wire.Frame) error {
	s := cn.s
	s.log.Info("shutdown requested")
	s.killAll()
	s.mu.Lock()
	cn.bye = true
	cn.ctrl = append(cn.ctrl, wire.Frame{Type: wire.Bye})
	cn.wakeUp()
	s.mu.Unlock()
	s.stop()
	return errStopReading
}
