package cmdclient

import (
	"context"
	"io"
	"sync"
	"time"

	"github.com/pcsync/pcsync/pkg/sandbox/wire"
)

// Command is what Exec runs. Its stdin and output are streams, in the
// shape of client-go's remotecommand.StreamOptions: the client holds none
// of them.
type Command struct {
	// Argv is run as is, without a shell; Argv[0] is looked up in PATH.
	Argv []string
	// Cwd is the working directory; empty: the server's.
	Cwd string
	// Env is the environment: exactly Env, or the server's own
	// environment overlaid with Env when BaseEnv is set.
	Env     map[string]string
	BaseEnv bool
	// Stdin, if not nil, is read once the command is started, from a
	// goroutine of the client, and sent as the command's stdin, which is
	// closed at its EOF; nil: /dev/null. A read error other than EOF fails
	// the command (and kills it); so does a stream that breaks before EOF
	// was sent (how much arrived is unknown).
	Stdin io.Reader
	// Stdout and Stderr, if not nil, are written each chunk of output as
	// it arrives, in order, from the client's reader goroutine (a slow
	// writer holds up the stream's other commands); nil: the output is
	// dropped. A write error fails the command (and kills it). No write
	// happens once Wait has returned.
	Stdout, Stderr io.Writer
	// Timeout > 0 makes the server SIGKILL the command's process group
	// after it (Exit.TimedOut).
	Timeout time.Duration
}

// Exit is how a command ended; its output went to Command.Stdout and
// Command.Stderr.
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
}

// Process is a command started by Start.
type Process struct {
	c   *Client
	id  uint32
	cmd Command
	// outMu is held while its output is written (Wait takes it before it
	// returns, so that no write follows).
	outMu sync.Mutex

	// Guarded by c.mu.
	// stdout and stderr count the output delivered (Attach's offsets).
	stdout, stderr int64
	// startSent: its Start went out; stdinOpen: its stdin is being sent
	// (from Start until StdinClose went out).
	startSent, stdinOpen bool
	abandoned            bool
	exit                 Exit
	err                  error
	done                 chan struct{}
}

// ID is the command's id on the server.
func (p *Process) ID() uint32 { return p.id }

// Wait waits for the command to end and returns its Exit. If ctx ends
// first, Wait SIGKILLs the command's process group, stops collecting its
// output and returns ctx's error at once.
func (p *Process) Wait(ctx context.Context) (Exit, error) {
	select {
	case <-p.done:
		p.writesDone()
		return p.exit, p.err
	case <-ctx.Done():
	}
	c := p.c
	c.mu.Lock()
	select {
	case <-p.done:
		c.mu.Unlock()
		p.writesDone()
		return p.exit, p.err
	default:
	}
	p.abandoned = true
	c.mu.Unlock()
	p.writesDone()
	go func() {
		if c.send(killFrame(p.id), releaseFrame(p.id)) == nil {
			c.mu.Lock()
			if c.procs[p.id] == p {
				delete(c.procs, p.id)
			}
			c.mu.Unlock()
		} // else resume kills it on the next stream
	}()
	return Exit{}, ctx.Err()
}

// writesDone waits for a write of the command's output in progress: once
// the command ended (or was abandoned), none follows.
func (p *Process) writesDone() {
	p.outMu.Lock()
	p.outMu.Unlock() //nolint:staticcheck // a barrier
}

// Signal sends sig (TERM, KILL, INT or HUP) to the command's process group.
func (p *Process) Signal(ctx context.Context, sig string) error {
	return p.c.Signal(ctx, p.id, sig)
}

// startFrame is the command's Start.
func startFrame(p *Process) wire.Frame {
	cmd := p.cmd
	return wire.JSON(wire.Start, p.id, wire.StartPayload{
		Argv: cmd.Argv, Cwd: cmd.Cwd, Env: cmd.Env, BaseEnv: cmd.BaseEnv,
		TimeoutMs: cmd.Timeout.Milliseconds(), Stdin: cmd.Stdin != nil,
	})
}

func killFrame(id uint32) wire.Frame {
	return wire.JSON(wire.Signal, id, wire.SignalPayload{Signal: "KILL"})
}

func releaseFrame(id uint32) wire.Frame { return wire.Frame{Type: wire.Release, ID: id} }
