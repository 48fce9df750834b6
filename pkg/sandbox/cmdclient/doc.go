// Package cmdclient drives a sandbox command server (package cmdserver)
// over one long-lived byte stream, such as a Kubernetes exec of `pcsync
// sandbox-server attach`. Many Execs run at once on the one stream; when
// the stream breaks, the client opens a new one and re-attaches to every
// running command so that no output is lost or duplicated. A server that
// answers Hello with another protocol version than wire.Version is refused:
// New fails, and so does each reconnect to it. A command's stdin and
// output are streams (Command.Stdin, Stdout, Stderr, as in client-go's
// remotecommand.StreamOptions): the client holds one stdin frame per
// command being fed and counts the output it delivered, which is all a
// re-attach needs.
//
// Files:
//
//	options.go  Opener, Options and their defaults
//	client.go   Client: New, Start, Exec, Signal, Ping, Shutdown, Close; writing frames; ending commands
//	process.go  Command, Exit, Process and Wait; the frame that starts a command
//	stdin.go    sending a command's stdin as it is read
//	stream.go   opening a stream and saying Hello; reconnecting (wait.Backoff) and resuming the commands
//	read.go     the reader: one handler per frame type the server sends
package cmdclient
