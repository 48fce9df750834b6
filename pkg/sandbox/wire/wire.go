// Package wire is the framing between pcsync's sandbox command client (in
// the daemon) and the command server (inside a sandbox pod).
//
// # Frames
//
// Every frame is a 9-byte header followed by a payload:
//
//	byte 0     type (see Type)
//	bytes 1-4  command id, big-endian uint32 (0 when the frame is about no command)
//	bytes 5-8  payload length, big-endian uint32, at most MaxPayload (1 MiB)
//	...        payload: raw bytes (Stdout, Stderr, Stdin) or JSON (the others; may be empty)
//
// A longer payload is a protocol error: the reader fails with ErrTooLarge
// and the stream is unusable.
//
// # Conversation
//
// The client opens a stream and sends Hello; the server answers HelloOK
// with its pid and the ids of the commands it still holds. Both carry
// Version: a server answers a Hello of another version with an Error (id 0)
// that names both versions and closes the stream, and a client refuses a
// HelloOK of another version. The client picks
// command ids itself (unique for the server's life; the server rejects an id
// it still holds with an Error frame for that id).
//
// Start (id N, StartPayload) runs a command. If StartPayload.Stdin is set,
// Stdin frames (raw bytes) and one StdinClose follow; otherwise the
// command's stdin is /dev/null. The server streams Stdout and Stderr frames
// (raw chunks, in order per stream) and ends with one Exit frame after the
// command's main process exited and its pipes were drained. Signal sends a
// signal to the command's whole process group.
//
// Commands belong to the server, not to a stream: when the stream breaks,
// they keep running and their output keeps buffering. A new stream sends
// Hello, then Attach (AttachPayload: the byte offsets already received per
// stream); the server replays from there, keeps streaming, and sends Exit if
// the command has ended. Release tells the server the client has the Exit,
// so it may forget the command and its output.
//
// Ping is answered by Pong (same id). Shutdown makes the server SIGKILL
// every process group it started, answer Bye and exit.
package wire

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// Version is the protocol version carried by Hello and HelloOK.
const Version = 1

// HeaderSize is the size of a frame header in bytes.
const HeaderSize = 9

// MaxPayload is the largest payload a frame may carry (1 MiB).
const MaxPayload = 1 << 20

// ErrTooLarge is returned for a frame whose payload exceeds MaxPayload.
var ErrTooLarge = errors.New("wire: frame payload exceeds 1 MiB")

// Type is the kind of a frame.
type Type uint8

// Frame types. Client to server: Hello .. Shutdown; server to client:
// HelloOK .. Bye.
const (
	// Hello opens a conversation (HelloPayload).
	Hello Type = 1
	// Start runs command id (StartPayload).
	Start Type = 2
	// Stdin carries raw bytes for the command's stdin.
	Stdin Type = 3
	// StdinClose closes the command's stdin (no payload).
	StdinClose Type = 4
	// Signal signals the command's process group (SignalPayload).
	Signal Type = 5
	// Attach makes this stream the command's output destination
	// (AttachPayload).
	Attach Type = 6
	// Release lets the server forget an ended command (no payload).
	Release Type = 7
	// Ping asks for a Pong with the same id (no payload).
	Ping Type = 8
	// Shutdown kills every process group the server started, then the
	// server answers Bye and exits (no payload).
	Shutdown Type = 9

	// HelloOK answers Hello (HelloOKPayload).
	HelloOK Type = 64
	// Stdout carries a raw chunk of the command's stdout.
	Stdout Type = 65
	// Stderr carries a raw chunk of the command's stderr.
	Stderr Type = 66
	// Exit ends a command's output (ExitPayload).
	Exit Type = 67
	// Error reports a failed request (ErrorPayload); its id is the
	// command's, or 0.
	Error Type = 68
	// Pong answers Ping (no payload).
	Pong Type = 69
	// Bye answers Shutdown; the server closes the stream after it.
	Bye Type = 70
)

var typeNames = map[Type]string{
	Hello: "Hello", Start: "Start", Stdin: "Stdin", StdinClose: "StdinClose",
	Signal: "Signal", Attach: "Attach", Release: "Release", Ping: "Ping",
	Shutdown: "Shutdown", HelloOK: "HelloOK", Stdout: "Stdout", Stderr: "Stderr",
	Exit: "Exit", Error: "Error", Pong: "Pong", Bye: "Bye",
}

// String returns the type's name, or Type(N) for an unknown one.
func (t Type) String() string {
	if s, ok := typeNames[t]; ok {
		return s
	}
	return "Type(" + strconv.Itoa(int(t)) + ")"
}

// Frame is one protocol message.
type Frame struct {
	Type Type
	// ID is the command the frame is about, 0 for none.
	ID uint32
	// Payload is raw bytes or JSON, depending on Type.
	Payload []byte
}

// Write writes f to w in one Write call. It is not safe for concurrent use
// on one w: callers serialize.
func Write(w io.Writer, f Frame) error {
	if len(f.Payload) > MaxPayload {
		return fmt.Errorf("write %v frame of %d bytes: %w", f.Type, len(f.Payload), ErrTooLarge)
	}
	buf := make([]byte, HeaderSize+len(f.Payload))
	buf[0] = byte(f.Type)
	binary.BigEndian.PutUint32(buf[1:5], f.ID)
	binary.BigEndian.PutUint32(buf[5:9], uint32(len(f.Payload)))
	copy(buf[HeaderSize:], f.Payload)
	if _, err := w.Write(buf); err != nil {
		return fmt.Errorf("write %v frame: %w", f.Type, err)
	}
	return nil
}

// JSON returns a frame of type t for command id whose payload is v encoded
// as JSON. It panics if v cannot be encoded (the payload types always can).
func JSON(t Type, id uint32, v any) Frame {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("wire: encode %v payload: %v", t, err))
	}
	return Frame{Type: t, ID: id, Payload: b}
}

// Decode unmarshals f's JSON payload into v; an empty payload leaves v
// unchanged.
func (f Frame) Decode(v any) error {
	if len(f.Payload) == 0 {
		return nil
	}
	if err := json.Unmarshal(f.Payload, v); err != nil {
		return fmt.Errorf("decode %v payload: %w", f.Type, err)
	}
	return nil
}

// Reader reads frames from a stream. It is not safe for concurrent use.
type Reader struct {
	r   io.Reader
	hdr [HeaderSize]byte
}

// NewReader returns a Reader of r. Wrap r in a bufio.Reader if it is
// unbuffered and small frames are common.
func NewReader(r io.Reader) *Reader { return &Reader{r: r} }

// Read returns the next frame; its payload is newly allocated. It returns
// io.EOF at a clean end of stream (between frames), io.ErrUnexpectedEOF
// within a frame, and ErrTooLarge for an oversized payload.
func (r *Reader) Read() (Frame, error) {
	if _, err := io.ReadFull(r.r, r.hdr[:]); err != nil {
		return Frame{}, err
	}
	f := Frame{Type: Type(r.hdr[0]), ID: binary.BigEndian.Uint32(r.hdr[1:5])}
	n := binary.BigEndian.Uint32(r.hdr[5:9])
	if n > MaxPayload {
		return Frame{}, fmt.Errorf("read %v frame of %d bytes: %w", f.Type, n, ErrTooLarge)
	}
	if n > 0 {
		f.Payload = make([]byte, n)
		if _, err := io.ReadFull(r.r, f.Payload); err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return Frame{}, fmt.Errorf("read %v frame payload: %w", f.Type, err)
		}
	}
	return f, nil
}

// HelloPayload is the payload of Hello.
type HelloPayload struct {
	Version int `json:"version"`
}

// HelloOKPayload is the payload of HelloOK.
type HelloOKPayload struct {
	Version int `json:"version"`
	// PID is the server's process id; a different pid after a reconnect
	// means a new server that knows none of the old commands.
	PID int `json:"pid"`
	// Running lists the commands the server holds (running, or ended but
	// not yet released).
	Running []uint32 `json:"running,omitempty"`
}

// StartPayload is the payload of Start.
type StartPayload struct {
	// Argv is run as is: Argv[0] is looked up in PATH when it has no
	// slash; no shell is involved.
	Argv []string `json:"argv"`
	// Cwd is the working directory; empty: the server's.
	Cwd string `json:"cwd,omitempty"`
	// Env is the command's environment (BaseEnv false) or what overlays
	// the server's own environment (BaseEnv true).
	Env     map[string]string `json:"env,omitempty"`
	BaseEnv bool              `json:"baseEnv,omitempty"`
	// TimeoutMs > 0 SIGKILLs the command's process group after that many
	// milliseconds.
	TimeoutMs int64 `json:"timeoutMs,omitempty"`
	// Stdin says Stdin frames and a StdinClose follow; false: /dev/null.
	Stdin bool `json:"stdin,omitempty"`
}

// SignalPayload is the payload of Signal.
type SignalPayload struct {
	// Signal is TERM, KILL, INT or HUP.
	Signal string `json:"signal"`
}

// AttachPayload is the payload of Attach: the bytes of each stream the
// client already has.
type AttachPayload struct {
	Stdout int64 `json:"stdout,omitempty"`
	Stderr int64 `json:"stderr,omitempty"`
}

// ExitPayload is the payload of Exit.
type ExitPayload struct {
	// ExitCode is the exit status; 128+N when killed by signal N; 127 when
	// the executable was not found, 126 when it could not be started.
	ExitCode int `json:"exitCode"`
	// Signal names the signal that killed the main process ("SIGKILL"),
	// empty if none.
	Signal string `json:"signal,omitempty"`
	// TimedOut says the server killed the process group at its timeout.
	TimedOut bool `json:"timedOut,omitempty"`
	// Error says why the command could not start (or lost output), empty
	// if none.
	Error string `json:"error,omitempty"`
}

// ErrorPayload is the payload of Error.
type ErrorPayload struct {
	Message string `json:"message"`
}
