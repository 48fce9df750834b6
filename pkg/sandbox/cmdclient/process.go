package cmdclient

import (
	"context"
	"fmt"
	"time"

	"github.com/pcsync/pcsync/pkg/sandbox/wire"
)

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

// Process is a command started by Start.
type Process struct {
	c        *Client
	id       uint32
	cmd      Command
	onOutput func(Stream, []byte)

	// Guarded by c.mu.
	stdout, stderr []byte
	startSent      bool
	abandoned      bool
	exit           Exit
	err            error
	done           chan struct{}
}

// ID is the command's id on the server.
func (p *Process) ID() uint32 { return p.id }

// output is the command's output received so far on stream s. c.mu is
// held.
func (p *Process) output(s Stream) *[]byte {
	if s == Stderr {
		return &p.stderr
	}
	return &p.stdout
}

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

// Signal sends sig (TERM, KILL, INT or HUP) to the command's process group.
func (p *Process) Signal(ctx context.Context, sig string) error {
	return p.c.Signal(ctx, p.id, sig)
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

func killFrame(id uint32) wire.Frame {
	return wire.JSON(wire.Signal, id, wire.SignalPayload{Signal: "KILL"})
}

func releaseFrame(id uint32) wire.Frame { return wire.Frame{Type: wire.Release, ID: id} }
