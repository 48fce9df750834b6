package cmdserver_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/pcsync/pcsync/pkg/sandbox/cmdserver"
	"github.com/pcsync/pcsync/pkg/sandbox/wire"
)

func testOptions(t *testing.T) cmdserver.Options {
	t.Helper()
	dir, err := os.MkdirTemp("/tmp", "pcs")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	opts := cmdserver.DefaultOptions()
	opts.Socket = filepath.Join(dir, "run", "s.sock")
	opts.Logger = slog.New(slog.DiscardHandler)
	return opts
}

// serve runs Serve until the test ends and waits for the socket.
func serve(t *testing.T, opts cmdserver.Options) chan error {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cmdserver.Serve(ctx, opts) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	deadline := time.Now().Add(5 * time.Second)
	for {
		nc, err := net.Dial("unix", opts.Socket)
		if err == nil {
			nc.Close()
			return done
		}
		select {
		case err := <-done:
			t.Fatalf("Serve: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("server not listening: %v", err)
		}
		time.Sleep(2 * time.Millisecond) // waiting for Serve to listen
	}
}

type rawConn struct {
	t  *testing.T
	nc net.Conn
	r  *wire.Reader
}

// dial connects, says Hello and returns the HelloOK payload.
func dial(t *testing.T, socket string) (*rawConn, wire.HelloOKPayload) {
	t.Helper()
	nc, err := net.Dial("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	c := &rawConn{t: t, nc: nc, r: wire.NewReader(nc)}
	c.send(wire.JSON(wire.Hello, 0, wire.HelloPayload{Version: wire.Version}))
	f := c.read()
	var hello wire.HelloOKPayload
	if f.Type != wire.HelloOK {
		t.Fatalf("answer to Hello: %v", f.Type)
	}
	if err := f.Decode(&hello); err != nil {
		t.Fatal(err)
	}
	return c, hello
}

func (c *rawConn) send(fs ...wire.Frame) {
	c.t.Helper()
	for _, f := range fs {
		if err := wire.Write(c.nc, f); err != nil {
			c.t.Fatal(err)
		}
	}
}

func (c *rawConn) read() wire.Frame {
	c.t.Helper()
	c.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	f, err := c.r.Read()
	if err != nil {
		c.t.Fatalf("read frame: %v", err)
	}
	return f
}

// sync waits until the server handled every frame sent so far on c (it
// handles a connection's frames in order).
func (c *rawConn) sync() {
	c.t.Helper()
	c.send(wire.Frame{Type: wire.Ping, ID: 77})
	if f := c.read(); f.Type != wire.Pong || f.ID != 77 {
		c.t.Fatalf("answer to Ping: %v %d", f.Type, f.ID)
	}
}

// outcome is what a command sent until its Exit.
type outcome struct {
	Stdout, Stderr string
	Exit           wire.ExitPayload
}

// collect reads frames of command id until its Exit.
func (c *rawConn) collect(id uint32) outcome {
	c.t.Helper()
	var o outcome
	for {
		f := c.read()
		if f.ID != id {
			c.t.Fatalf("frame %v for command %d, want %d", f.Type, f.ID, id)
		}
		switch f.Type {
		case wire.Stdout:
			o.Stdout += string(f.Payload)
		case wire.Stderr:
			o.Stderr += string(f.Payload)
		case wire.Exit:
			if err := f.Decode(&o.Exit); err != nil {
				c.t.Fatal(err)
			}
			return o
		default:
			c.t.Fatalf("unexpected %v frame: %s", f.Type, f.Payload)
		}
	}
}

func start(id uint32, argv ...string) wire.Frame {
	return wire.JSON(wire.Start, id, wire.StartPayload{Argv: argv})
}

func TestSocketSetup(t *testing.T) {
	opts := testOptions(t)
	serve(t, opts)
	for _, c := range []struct {
		path string
		want os.FileMode
	}{
		{filepath.Dir(opts.Socket), os.ModeDir | 0o700},
		{opts.Socket, os.ModeSocket | 0o600},
	} {
		fi, err := os.Stat(c.path)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode() & (os.ModeType | os.ModePerm); got != c.want {
			t.Errorf("%s: mode %v, want %v", c.path, got, c.want)
		}
	}
	err := cmdserver.Serve(context.Background(), opts)
	if !errors.Is(err, cmdserver.ErrAlreadyRunning) {
		t.Errorf("second Serve: %v, want ErrAlreadyRunning", err)
	}
}

func TestStaleSocketReplaced(t *testing.T) {
	opts := testOptions(t)
	if err := os.MkdirAll(filepath.Dir(opts.Socket), 0o700); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("unix", opts.Socket)
	if err != nil {
		t.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close()
	if _, err := os.Stat(opts.Socket); err != nil {
		t.Fatalf("stale socket: %v", err)
	}
	serve(t, opts)
	c, _ := dial(t, opts.Socket)
	c.send(start(1, "echo", "ok"))
	if got := c.collect(1); got.Stdout != "ok\n" {
		t.Errorf("stdout %q, want ok", got.Stdout)
	}
}

func TestProtocolErrors(t *testing.T) {
	opts := testOptions(t)
	serve(t, opts)
	c, _ := dial(t, opts.Socket)
	c.send(start(1, "sleep", "300"))
	tests := []struct {
		name string
		send wire.Frame
		want wire.Frame
	}{
		{"duplicate id", start(1, "true"), wire.JSON(wire.Error, 1, wire.ErrorPayload{Message: "command 1: id already in use"})},
		{"attach unknown id", wire.JSON(wire.Attach, 9, wire.AttachPayload{}), wire.JSON(wire.Error, 9, wire.ErrorPayload{Message: "Attach: unknown command 9"})},
		{"signal unknown id", wire.JSON(wire.Signal, 9, wire.SignalPayload{Signal: "KILL"}), wire.JSON(wire.Error, 9, wire.ErrorPayload{Message: "Signal: unknown command 9"})},
		{"bad signal", wire.JSON(wire.Signal, 1, wire.SignalPayload{Signal: "USR1"}), wire.JSON(wire.Error, 1, wire.ErrorPayload{Message: `signal "USR1": want TERM, KILL, INT or HUP`})},
		{"stdin without stdin", wire.Frame{Type: wire.Stdin, ID: 1, Payload: []byte("x")}, wire.JSON(wire.Error, 1, wire.ErrorPayload{Message: "Stdin: command 1 was started without stdin"})},
		{"unknown type", wire.Frame{Type: 99, ID: 3}, wire.JSON(wire.Error, 3, wire.ErrorPayload{Message: "unexpected frame type Type(99)"})},
		{"ping", wire.Frame{Type: wire.Ping, ID: 42}, wire.Frame{Type: wire.Pong, ID: 42}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c.t = t
			c.send(tt.send)
			if diff := cmp.Diff(tt.want, c.read()); diff != "" {
				t.Errorf("answer (-want +got):\n%s", diff)
			}
		})
	}
	c.t = t
	c.send(wire.JSON(wire.Signal, 1, wire.SignalPayload{Signal: "KILL"}))
	if diff := cmp.Diff(outcome{Exit: wire.ExitPayload{ExitCode: 137, Signal: "SIGKILL"}}, c.collect(1)); diff != "" {
		t.Errorf("killed command (-want +got):\n%s", diff)
	}
}

// TestOutputBuffersWhileDetached drops the connection that started a
// command; a new connection sees it in HelloOK and attaches to get all of
// its output and its Exit; Release makes the server forget it.
func TestOutputBuffersWhileDetached(t *testing.T) {
	opts := testOptions(t)
	serve(t, opts)
	c1, _ := dial(t, opts.Socket)
	c1.send(wire.JSON(wire.Start, 5, wire.StartPayload{Argv: []string{"sh", "-c", "read x; echo $x; echo e >&2; seq 1 3"}, Stdin: true}))
	c1.sync()
	c1.nc.Close()

	c2, hello := dial(t, opts.Socket)
	if diff := cmp.Diff([]uint32{5}, hello.Running); diff != "" {
		t.Errorf("HelloOK.Running (-want +got):\n%s", diff)
	}
	if hello.PID != os.Getpid() {
		t.Errorf("HelloOK.PID = %d, want %d", hello.PID, os.Getpid())
	}
	c2.send(wire.Frame{Type: wire.Stdin, ID: 5, Payload: []byte("hello\n")}, wire.Frame{Type: wire.StdinClose, ID: 5})
	c2.send(wire.JSON(wire.Attach, 5, wire.AttachPayload{}))
	want := outcome{Stdout: "hello\n1\n2\n3\n", Stderr: "e\n"}
	if diff := cmp.Diff(want, c2.collect(5)); diff != "" {
		t.Errorf("attached output (-want +got):\n%s", diff)
	}
	// Attach again mid-way: the server replays from there.
	c2.send(wire.JSON(wire.Attach, 5, wire.AttachPayload{Stdout: 2}))
	if diff := cmp.Diff(outcome{Stdout: "llo\n1\n2\n3\n", Stderr: "e\n"}, c2.collect(5)); diff != "" {
		t.Errorf("attach at offset 2 (-want +got):\n%s", diff)
	}
	c2.send(wire.JSON(wire.Attach, 5, wire.AttachPayload{Stdout: 6, Stderr: 2}))
	if diff := cmp.Diff(outcome{Stdout: "1\n2\n3\n"}, c2.collect(5)); diff != "" {
		t.Errorf("second attach (-want +got):\n%s", diff)
	}
	c2.send(wire.Frame{Type: wire.Release, ID: 5})
	c2.sync()
	_, hello = dial(t, opts.Socket)
	if len(hello.Running) != 0 {
		t.Errorf("HelloOK.Running after Release = %v, want none", hello.Running)
	}
}

// TestBufferCap checks that output past MaxBuffer still reaches an attached
// client entirely (the server waits for it), and that an Attach asking for
// discarded bytes gets an Error.
func TestBufferCap(t *testing.T) {
	opts := testOptions(t)
	opts.MaxBuffer = 64 << 10
	serve(t, opts)
	c, _ := dial(t, opts.Socket)
	c.send(start(1, "sh", "-c", "seq 1 200000"))
	got := c.collect(1)
	var want strings.Builder
	for i := 1; i <= 200000; i++ {
		want.WriteString(itoa(i))
		want.WriteByte('\n')
	}
	if got.Stdout != want.String() {
		t.Errorf("stdout: %d bytes, want %d", len(got.Stdout), want.Len())
	}
	c.send(wire.JSON(wire.Attach, 1, wire.AttachPayload{Stdout: 0}))
	f := c.read()
	if f.Type != wire.Error || !strings.Contains(string(f.Payload), "were discarded") {
		t.Errorf("Attach at a discarded offset: %v %s, want an Error", f.Type, f.Payload)
	}
	// What is still kept follows, then Exit.
	rest := c.collect(1)
	if !strings.HasSuffix(want.String(), rest.Stdout) || len(rest.Stdout) == 0 || int64(len(rest.Stdout)) > opts.MaxBuffer {
		t.Errorf("kept output after the Error: %d bytes, want the last bytes, at most %d", len(rest.Stdout), opts.MaxBuffer)
	}
}

func itoa(i int) string {
	var b [20]byte
	n := len(b)
	for {
		n--
		b[n] = byte('0' + i%10)
		i /= 10
		if i == 0 {
			return string(b[n:])
		}
	}
}

func TestShutdownFrame(t *testing.T) {
	opts := testOptions(t)
	done := serve(t, opts)
	c, _ := dial(t, opts.Socket)
	c.send(start(1, "sleep", "300"), wire.Frame{Type: wire.Shutdown})
	var types []wire.Type
	for {
		f := c.read()
		types = append(types, f.Type)
		if f.Type == wire.Bye {
			break
		}
	}
	if diff := cmp.Diff([]wire.Type{wire.Bye}, types[len(types)-1:]); diff != "" {
		t.Errorf("frames (-want +got):\n%s", diff)
	}
	select {
	case err := <-done:
		done <- err // for the cleanup
		if err != nil {
			t.Errorf("Serve: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return after Shutdown")
	}
	if _, err := os.Stat(opts.Socket); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket after shutdown: %v, want it removed", err)
	}
}

// TestAttachEndsWhenServerCloses runs the relay with a stdin that never
// ends (as on kwok): it must return nil once the server closes the socket.
func TestAttachEndsWhenServerCloses(t *testing.T) {
	opts := testOptions(t)
	serve(t, opts)
	inR, inW := io.Pipe()
	defer inW.Close()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- cmdserver.Attach(context.Background(), cmdserver.AttachOptions{Socket: opts.Socket, Stdin: inR, Stdout: outW, Logger: opts.Logger})
		outW.Close()
	}()
	go func() {
		wire.Write(inW, wire.JSON(wire.Hello, 0, wire.HelloPayload{Version: wire.Version}))
		wire.Write(inW, wire.Frame{Type: wire.Shutdown})
	}()
	var types []wire.Type
	r := wire.NewReader(outR)
	for {
		f, err := r.Read()
		if err != nil {
			break
		}
		types = append(types, f.Type)
	}
	if diff := cmp.Diff([]wire.Type{wire.HelloOK, wire.Bye}, types); diff != "" {
		t.Errorf("frames through the relay (-want +got):\n%s", diff)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Attach: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Attach did not return after the server closed the socket")
	}
}

func TestAttachNoServer(t *testing.T) {
	opts := testOptions(t)
	err := cmdserver.Attach(context.Background(), cmdserver.AttachOptions{Socket: opts.Socket, Stdin: strings.NewReader(""), Stdout: io.Discard, Logger: opts.Logger})
	if err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("Attach without a server and without Spawn: %v, want a connect error", err)
	}
}

// TestHelloOfAnotherVersionRefused sends Hellos of other protocol
// versions: the server answers an Error (id 0) naming both versions and
// closes the connection; a Hello of its version on a new one still works.
func TestHelloOfAnotherVersionRefused(t *testing.T) {
	opts := testOptions(t)
	serve(t, opts)
	tests := []struct {
		name  string
		hello wire.Frame
		want  string
	}{
		{"newer", wire.JSON(wire.Hello, 0, wire.HelloPayload{Version: wire.Version + 1}),
			"Hello: the client speaks protocol version " + itoa(wire.Version+1) + ", this server " + itoa(wire.Version) + ": refused"},
		{"none", wire.Frame{Type: wire.Hello},
			"Hello: the client speaks protocol version 0, this server " + itoa(wire.Version) + ": refused"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nc, err := net.Dial("unix", opts.Socket)
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			c := &rawConn{t: t, nc: nc, r: wire.NewReader(nc)}
			c.send(tt.hello)
			want := wire.JSON(wire.Error, 0, wire.ErrorPayload{Message: tt.want})
			if diff := cmp.Diff(want, c.read()); diff != "" {
				t.Errorf("answer to Hello (-want +got):\n%s", diff)
			}
			nc.SetReadDeadline(time.Now().Add(5 * time.Second))
			if f, err := c.r.Read(); !errors.Is(err, io.EOF) {
				t.Errorf("after the refusal: frame %v, error %v; want the connection closed (EOF)", f.Type, err)
			}
		})
	}
	c, hello := dial(t, opts.Socket)
	if hello.Version != wire.Version {
		t.Errorf("HelloOK version %d, want %d", hello.Version, wire.Version)
	}
	c.sync()
}

// TestPrepare: Prepare gets each command's environment before it starts;
// its error fails the start (126, the error in the Exit), a nil one lets
// the command run.
func TestPrepare(t *testing.T) {
	opts := testOptions(t)
	var mu sync.Mutex
	var seen []string
	opts.Prepare = func(env []string) error {
		mu.Lock()
		defer mu.Unlock()
		for _, kv := range env {
			if strings.HasPrefix(kv, "MARK=") {
				seen = append(seen, kv)
			}
		}
		if slices.Contains(env, "MARK=refuse") {
			return errors.New("the socket cannot start")
		}
		return nil
	}
	serve(t, opts)
	c, _ := dial(t, opts.Socket)
	var got []outcome
	for i, mark := range []string{"run", "refuse"} {
		id := uint32(i + 1)
		c.send(wire.JSON(wire.Start, id, wire.StartPayload{Argv: []string{"sh", "-c", "echo ran"}, Env: map[string]string{"MARK": mark, "PATH": "/usr/bin:/bin"}}))
		got = append(got, c.collect(id))
	}
	want := []outcome{{Stdout: "ran\n"}, {Exit: wire.ExitPayload{ExitCode: 126, Error: "start: the socket cannot start"}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"MARK=run", "MARK=refuse"}, seen); diff != "" {
		t.Errorf("Prepare's environments (-want +got):\n%s", diff)
	}
}
