// Package cmdserver is the command server that runs inside a sandbox pod,
// and the relay (Attach) that a Kubernetes exec runs to reach it.
//
// Serve listens on a Unix socket and speaks the protocol of package
// pkg/sandbox/wire. Each command runs in its own process group; the server
// is a child subreaper and reaps every child and orphan as soon as it
// exits, so a `kill PID; while kill -0 PID; ...` loop ends at once.
// Commands belong to the server, not to a connection: output goes to the
// connection that started or last attached to the command, and keeps
// buffering (per command, until Release) while no connection is attached.
// A connection whose Hello carries another protocol version than
// wire.Version is answered with an Error frame and closed.
//
// Serve reaps every child of its process with wait4(-1): do not start and
// wait for other child processes in the same process while it runs.
//
// Locks, by concern: procMu pairs each fork with the reaper's table of
// pids; the process groups to kill at shutdown have their own lock; mu
// guards the commands, their output and the connections that deliver it
// (one lock for these three: a command's output cap waits on what its
// connection has sent). Lock order: procMu, then mu, then the groups' lock.
//
// Files:
//
//	options.go   Options, AttachOptions and their defaults
//	server.go    Serve: the server's life (listen, accept, stop, shut down)
//	listen.go    the socket and its lock file
//	process.go   starting a command: argv, environment, PATH, pipes, fork; its timeout
//	reap.go      the reaper (wait4 on SIGCHLD), exit statuses, killing every process group
//	command.go   a command's state: its output streams (stdout, stderr) with their cap, its stdin queue
//	conn.go      a client connection: what it sends next, its read and send loops
//	handlers.go  the handler of each frame type a client sends
//	watch.go     stopping when the socket is removed or the owner ends; closing inherited files
//	attach.go    Attach: the relay between an exec's stdin/stdout and the socket, spawning a server if none listens
package cmdserver
