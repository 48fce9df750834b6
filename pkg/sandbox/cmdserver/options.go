package cmdserver

import (
	"cmp"
	"io"
	"log/slog"
	"os"
	"time"
)

// DefaultSocket is where the server listens in a sandbox pod.
const DefaultSocket = "/run/pcsync/sandbox.sock"

// Options configures Serve.
type Options struct {
	// Socket is the Unix socket to listen on. Its directory is created
	// 0700 if missing; the socket is 0600; a stale socket file is
	// replaced. A lock file Socket+".lock" keeps a second server away.
	// It has no default in Serve: an empty Socket is an error.
	Socket string
	// MaxBuffer caps the output kept per command, stdout and stderr
	// together. Past it, bytes already written to the attached
	// connection are discarded (oldest first); if all kept bytes are
	// still unsent, the server stops reading the command's pipes until
	// the client catches up, so the command blocks on write. An Attach
	// asking for discarded bytes gets an Error for the command.
	MaxBuffer int64
	// Drain is how long the pipes are still read after the command's main
	// process exited: a background child may hold them open forever.
	Drain time.Duration
	// KillWait bounds how long shutdown waits for killed process groups
	// to be reaped.
	KillWait time.Duration
	// Environ is the environment that BaseEnv commands overlay; nil: the
	// server's own (os.Environ()).
	Environ []string
	// OwnerPID, when set, is the process the server belongs to: the server
	// stops when it ends. A server spawned by Attach (pods that share the
	// host, as kwok's do) belongs to the process that ran the relay, the
	// node's agent.
	OwnerPID int
	// Watch is how often the server checks that its socket is still there
	// (it stops when the file is removed or replaced, as when its directory
	// is removed) and that its owner runs.
	Watch time.Duration
	// Logger receives structured logs; nil: text to stderr.
	Logger *slog.Logger
	// Prepare, when set, is called with each command's environment
	// before it starts (the GitHub CLI's socket is started from it,
	// package ghsocket); its error fails the start.
	Prepare func(env []string) error
}

// DefaultOptions returns the options of a server in a sandbox pod.
func DefaultOptions() Options {
	return Options{
		Socket:    DefaultSocket,
		MaxBuffer: 64 << 20,
		Drain:     50 * time.Millisecond,
		KillWait:  2 * time.Second,
		Watch:     time.Second,
	}
}

// complete fills the zero (or negative) fields but Socket with their
// defaults.
func (o *Options) complete() {
	d := DefaultOptions()
	o.MaxBuffer = cmp.Or(max(o.MaxBuffer, 0), d.MaxBuffer)
	o.Drain = cmp.Or(max(o.Drain, 0), d.Drain)
	o.KillWait = cmp.Or(max(o.KillWait, 0), d.KillWait)
	o.Watch = cmp.Or(max(o.Watch, 0), d.Watch)
	if o.Environ == nil {
		o.Environ = os.Environ()
	}
	if o.Logger == nil {
		o.Logger = stderrLogger()
	}
}

// AttachOptions configures Attach.
type AttachOptions struct {
	// Socket is the server's Unix socket. It has no default in Attach:
	// an empty Socket is an error.
	Socket string
	// Spawn starts a detached server when nothing listens on Socket (on a
	// node where nothing runs in the pod, such as kwok).
	Spawn bool
	// SpawnArgv is the server's command line; nil: os.Args[0]
	// sandbox-server serve --socket Socket --owner-pid PPID, where PPID is
	// the relay's parent (the node's agent that ran the exec), so the server
	// ends with it. Its output goes to Socket+".log".
	SpawnArgv []string
	// SpawnWait bounds the wait for a spawned server's socket; 0: 2 s.
	SpawnWait time.Duration
	// Stdin and Stdout are the stream to relay; nil: os.Stdin, os.Stdout.
	Stdin  io.Reader
	Stdout io.Writer
	// Logger receives structured logs; nil: text to stderr.
	Logger *slog.Logger
}

// DefaultAttachOptions returns the options of the relay in a sandbox pod:
// the default socket, the process's own stdin and stdout.
func DefaultAttachOptions() AttachOptions {
	return AttachOptions{
		Socket:    DefaultSocket,
		SpawnWait: 2 * time.Second,
		Stdin:     os.Stdin,
		Stdout:    os.Stdout,
	}
}

// complete fills the zero fields but Socket and SpawnArgv (whose default
// depends on Socket) with their defaults.
func (o *AttachOptions) complete() {
	d := DefaultAttachOptions()
	o.SpawnWait = cmp.Or(max(o.SpawnWait, 0), d.SpawnWait)
	if o.Stdin == nil {
		o.Stdin = d.Stdin
	}
	if o.Stdout == nil {
		o.Stdout = d.Stdout
	}
	if o.Logger == nil {
		o.Logger = stderrLogger()
	}
}

func stderrLogger() *slog.Logger { return slog.New(slog.NewTextHandler(os.Stderr, nil)) }
