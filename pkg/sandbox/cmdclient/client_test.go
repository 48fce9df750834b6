package cmdclient_test

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/pcsync/pcsync/pkg/sandbox/cmdclient"
	"github.com/pcsync/pcsync/pkg/sandbox/cmdserver"
)

// TestMain lets the test binary act as `pcsync sandbox-server serve|attach`
// for the relay tests (and for the server that attach --spawn starts).
func TestMain(m *testing.M) {
	if len(os.Args) > 2 && os.Args[1] == "sandbox-server" {
		os.Exit(helperMain(os.Args[2], os.Args[3:]))
	}
	os.Exit(m.Run())
}

func helperMain(sub string, args []string) int {
	fs := flag.NewFlagSet(sub, flag.ContinueOnError)
	socket := fs.String("socket", "", "")
	spawn := fs.Bool("spawn", false, "")
	owner := fs.Int("owner-pid", 0, "")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	var err error
	switch sub {
	case "serve":
		opts := cmdserver.DefaultOptions()
		opts.Socket, opts.OwnerPID, opts.Logger = *socket, *owner, log
		err = cmdserver.Serve(ctx, opts)
	case "attach":
		err = cmdserver.Attach(ctx, cmdserver.AttachOptions{Socket: *socket, Spawn: *spawn, Logger: log})
	default:
		err = fmt.Errorf("unknown subcommand %q", sub)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

type server struct {
	socket string
	done   chan error
	stop   context.CancelFunc
}

// tempSocket returns a short socket path in a fresh directory under /tmp.
func tempSocket(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("/tmp", "pcs")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return filepath.Join(dir, "run", "s.sock")
}

// startServer runs a server in-process until the test ends.
func startServer(t testing.TB, edit func(*cmdserver.Options)) *server {
	t.Helper()
	opts := cmdserver.DefaultOptions()
	opts.Socket = tempSocket(t)
	opts.Logger = slog.New(slog.DiscardHandler)
	if edit != nil {
		edit(&opts)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &server{socket: opts.Socket, done: make(chan error, 1), stop: cancel}
	go func() { s.done <- cmdserver.Serve(ctx, opts) }()
	t.Cleanup(func() {
		cancel()
		if err := <-s.done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	deadline := time.Now().Add(5 * time.Second)
	for {
		nc, err := net.Dial("unix", s.socket)
		if err == nil {
			nc.Close()
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("server not listening: %v", err)
		}
		time.Sleep(2 * time.Millisecond) // waiting for Serve to listen
	}
}

// connOpener dials the socket and remembers every connection it made.
type connOpener struct {
	socket string
	mu     sync.Mutex
	conns  []net.Conn
	fail   bool
}

func (o *connOpener) open(ctx context.Context) (io.ReadWriteCloser, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.fail {
		return nil, errors.New("opener refuses")
	}
	var d net.Dialer
	nc, err := d.DialContext(ctx, "unix", o.socket)
	if err != nil {
		return nil, err
	}
	o.conns = append(o.conns, nc)
	return nc, nil
}

func (o *connOpener) breakStream() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.conns[len(o.conns)-1].Close()
}

func newClient(t testing.TB, open cmdclient.Opener, edit func(*cmdclient.Options)) *cmdclient.Client {
	t.Helper()
	opts := cmdclient.DefaultOptions()
	opts.Backoff = 5 * time.Millisecond
	opts.Logger = slog.New(slog.DiscardHandler)
	if edit != nil {
		edit(&opts)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := cmdclient.New(ctx, open, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func clientFor(t testing.TB, s *server) (*cmdclient.Client, *connOpener) {
	o := &connOpener{socket: s.socket}
	return newClient(t, o.open, nil), o
}

func execCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// result is the comparable part of an Exit.
type result struct {
	Code     int
	Signal   string
	TimedOut bool
	Stdout   string
	Stderr   string
}

func resultOf(e ran) result {
	return result{Code: e.Code, Signal: e.Signal, TimedOut: e.TimedOut, Stdout: string(e.Stdout), Stderr: string(e.Stderr)}
}

// ran is an Exit with the output its command wrote.
type ran struct {
	cmdclient.Exit
	Stdout, Stderr []byte
}

// execOut runs cmd on c with its output into buffers, each chunk also
// to live (stream 1 or 2), if not nil.
func execOut(ctx context.Context, c *cmdclient.Client, cmd cmdclient.Command, live func(stream int, p []byte)) (ran, error) {
	var out, errOut bytes.Buffer
	cmd.Stdout = chunkWriter{&out, 1, live}
	cmd.Stderr = chunkWriter{&errOut, 2, live}
	exit, err := c.Exec(ctx, cmd)
	return ran{Exit: exit, Stdout: out.Bytes(), Stderr: errOut.Bytes()}, err
}

type chunkWriter struct {
	b      *bytes.Buffer
	stream int
	live   func(int, []byte)
}

func (w chunkWriter) Write(p []byte) (int, error) {
	w.b.Write(p)
	if w.live != nil {
		w.live(w.stream, p)
	}
	return len(p), nil
}

func TestExec(t *testing.T) {
	s := startServer(t, func(o *cmdserver.Options) {
		o.Environ = []string{"PATH=" + os.Getenv("PATH"), "PCSYNC_BASE=base", "A=old"}
	})
	c, _ := clientFor(t, s)
	dir := t.TempDir()
	tests := []struct {
		name      string
		cmd       cmdclient.Command
		want      result
		wantError string
	}{
		{
			name: "argv run exactly",
			cmd:  cmdclient.Command{Argv: []string{"printf", "%s|", "a b", "$HOME", "*", "'q'", ""}},
			want: result{Stdout: "a b|$HOME|*|'q'||"},
		},
		{
			name: "cwd",
			cmd:  cmdclient.Command{Argv: []string{"pwd"}, Cwd: dir},
			want: result{Stdout: dir + "\n"},
		},
		{
			name: "env exact",
			cmd:  cmdclient.Command{Argv: []string{"/usr/bin/env"}, Env: map[string]string{"B": "2", "A": "1 2"}},
			want: result{Stdout: "A=1 2\nB=2\n"},
		},
		{
			name: "env exact without PATH still finds argv[0] in the server's PATH",
			cmd:  cmdclient.Command{Argv: []string{"env"}, Env: map[string]string{"X": "y"}},
			want: result{Stdout: "X=y\n"},
		},
		{
			name: "base env overlaid",
			cmd:  cmdclient.Command{Argv: []string{"sh", "-c", `echo "$A $B $PCSYNC_BASE"`}, BaseEnv: true, Env: map[string]string{"A": "new", "B": "b"}},
			want: result{Stdout: "new b base\n"},
		},
		{
			name: "stdin delivered and read to EOF",
			cmd:  cmdclient.Command{Argv: []string{"cat"}, Stdin: bytes.NewReader([]byte("line 1\nline\x002"))},
			want: result{Stdout: "line 1\nline\x002"},
		},
		{
			name: "stdin over several frames",
			cmd:  cmdclient.Command{Argv: []string{"wc", "-c"}, Stdin: bytes.NewReader(bytes.Repeat([]byte("x"), 3<<20+5))},
			want: result{Stdout: "3145733\n"},
		},
		{
			name: "empty stdin is EOF at once",
			cmd:  cmdclient.Command{Argv: []string{"wc", "-c"}, Stdin: bytes.NewReader([]byte{})},
			want: result{Stdout: "0\n"},
		},
		{
			name: "no stdin is /dev/null",
			cmd:  cmdclient.Command{Argv: []string{"sh", "-c", "cat; readlink /proc/self/fd/0"}},
			want: result{Stdout: "/dev/null\n"},
		},
		{
			name: "stdout and stderr",
			cmd:  cmdclient.Command{Argv: []string{"sh", "-c", "echo out; echo err >&2; echo out2"}},
			want: result{Stdout: "out\nout2\n", Stderr: "err\n"},
		},
		{
			name: "exit code",
			cmd:  cmdclient.Command{Argv: []string{"sh", "-c", "exit 3"}},
			want: result{Code: 3},
		},
		{
			name: "killed by TERM",
			cmd:  cmdclient.Command{Argv: []string{"sh", "-c", "kill -TERM $$"}},
			want: result{Code: 143, Signal: "SIGTERM"},
		},
		{
			name: "killed by KILL",
			cmd:  cmdclient.Command{Argv: []string{"sh", "-c", "kill -KILL $$"}},
			want: result{Code: 137, Signal: "SIGKILL"},
		},
		{
			name:      "executable not found",
			cmd:       cmdclient.Command{Argv: []string{"pcsync-no-such-command"}},
			want:      result{Code: 127},
			wantError: `exec "pcsync-no-such-command": executable file not found in $PATH`,
		},
		{
			name:      "path not found",
			cmd:       cmdclient.Command{Argv: []string{"/nonexistent/bin/x"}},
			want:      result{Code: 127},
			wantError: "no such file or directory",
		},
		{
			name:      "not executable",
			cmd:       cmdclient.Command{Argv: []string{"/etc/passwd"}},
			want:      result{Code: 126},
			wantError: "permission denied",
		},
		{
			name:      "cwd missing",
			cmd:       cmdclient.Command{Argv: []string{"pwd"}, Cwd: filepath.Join(dir, "missing")},
			want:      result{Code: 127},
			wantError: "cwd",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			exit, err := execOut(execCtx(t), c, tt.cmd, nil)
			if err != nil {
				t.Fatalf("Exec: %v", err)
			}
			if diff := cmp.Diff(tt.want, resultOf(exit)); diff != "" {
				t.Errorf("Exec (-want +got):\n%s", diff)
			}
			if tt.wantError == "" && exit.Error != "" || !strings.Contains(exit.Error, tt.wantError) {
				t.Errorf("Exit.Error = %q, want it to contain %q", exit.Error, tt.wantError)
			}
		})
	}
	if got := c.Stats().Opens; got != 1 {
		t.Errorf("Opens = %d, want 1", got)
	}
}

func TestConcurrentExecsShareOneStream(t *testing.T) {
	s := startServer(t, nil)
	c, _ := clientFor(t, s)
	const n = 20
	got := make([]result, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			exit, err := execOut(execCtx(t), c, cmdclient.Command{
				Argv: []string{"sh", "-c", `echo "out $0"; sleep 0.1; echo "err $0" >&2; exit $(($0 % 7))`, strconv.Itoa(i)},
			}, nil)
			got[i], errs[i] = resultOf(exit), err
		})
	}
	wg.Wait()
	want := make([]result, n)
	for i := range n {
		want[i] = result{Code: i % 7, Stdout: fmt.Sprintf("out %d\n", i), Stderr: fmt.Sprintf("err %d\n", i)}
		if errs[i] != nil {
			t.Errorf("Exec %d: %v", i, errs[i])
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("results (-want +got):\n%s", diff)
	}
	if got := c.Stats(); got != (cmdclient.Stats{Opens: 1}) {
		t.Errorf("Stats = %+v, want 1 open and nothing running", got)
	}
}

// seqOutput is what `seq 1 n` prints.
func seqOutput(from, to int) []byte {
	var b bytes.Buffer
	for i := from; i <= to; i++ {
		b.WriteString(strconv.Itoa(i))
		b.WriteByte('\n')
	}
	return b.Bytes()
}

func TestLargeOutputIntact(t *testing.T) {
	s := startServer(t, nil)
	c, _ := clientFor(t, s)
	var live [2]bytes.Buffer
	exit, err := execOut(execCtx(t), c, cmdclient.Command{
		Argv: []string{"sh", "-c", "seq 1 1200000; seq 1 100000 >&2"},
	}, func(st int, p []byte) { live[st-1].Write(p) })
	if err != nil {
		t.Fatal(err)
	}
	wantOut, wantErr := seqOutput(1, 1200000), seqOutput(1, 100000)
	if len(wantOut) < 8<<20 {
		t.Fatalf("test output is only %d bytes", len(wantOut))
	}
	for _, c := range []struct {
		name      string
		got, want []byte
	}{
		{"Exit.Stdout", exit.Stdout, wantOut},
		{"Exit.Stderr", exit.Stderr, wantErr},
		{"live stdout", live[0].Bytes(), wantOut},
		{"live stderr", live[1].Bytes(), wantErr},
	} {
		if !bytes.Equal(c.got, c.want) {
			t.Errorf("%s: %d bytes, want %d bytes of seq output", c.name, len(c.got), len(c.want))
		}
	}
}

func alive(pid int) bool { return unix.Kill(pid, 0) == nil }

// waitGone waits up to 2 s for pid to be gone (killed and reaped).
func waitGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for alive(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("process %d still exists", pid)
		}
		time.Sleep(5 * time.Millisecond) // waiting for the kill and reap
	}
}

func pidOf(t *testing.T, b []byte) int {
	t.Helper()
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("pid %q: %v", b, err)
	}
	return pid
}

func TestBackgroundSurvivesAndShutdownKillsIt(t *testing.T) {
	s := startServer(t, nil)
	c, _ := clientFor(t, s)
	exit, err := execOut(execCtx(t), c, cmdclient.Command{Argv: []string{"sh", "-c", "nohup sleep 300 >/dev/null 2>&1 & echo $!"}}, nil)
	if err != nil || exit.Code != 0 {
		t.Fatalf("Exec = %+v, %v", exit, err)
	}
	pid := pidOf(t, exit.Stdout)
	if !alive(pid) {
		t.Fatalf("background sleep %d did not survive its command", pid)
	}
	// A background child that keeps the output pipe open does not hold
	// up the Exit beyond the drain.
	start := time.Now()
	exit, err = execOut(execCtx(t), c, cmdclient.Command{Argv: []string{"sh", "-c", "sleep 300 & echo started"}}, nil)
	if err != nil || string(exit.Stdout) != "started\n" {
		t.Fatalf("Exec = %+v, %v", exit, err)
	}
	// Held up, it would wait for the 300 s sleep; the bound is far from
	// both, so that a loaded machine does not fail it.
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("Exec with a background child holding stdout took %v: it waited for the child", d)
	}

	ctx := execCtx(t)
	if err := c.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-s.done:
		s.done <- err // for the cleanup
	case <-ctx.Done():
		t.Fatal("Serve did not return after Shutdown")
	}
	if alive(pid) {
		t.Errorf("background sleep %d alive after Shutdown", pid)
	}
	if _, err := execOut(ctx, c, cmdclient.Command{Argv: []string{"true"}}, nil); !errors.Is(err, cmdclient.ErrClosed) {
		t.Errorf("Exec after Shutdown: %v, want ErrClosed", err)
	}
}

func TestTimeoutKillsGrandchild(t *testing.T) {
	s := startServer(t, nil)
	c, _ := clientFor(t, s)
	pidFile := filepath.Join(t.TempDir(), "pid")
	exit, err := execOut(execCtx(t), c, cmdclient.Command{
		Argv:    []string{"sh", "-c", `sh -c 'sleep 300 & echo $! > "$0"; wait' "$0"; echo unreachable`, pidFile},
		Timeout: 300 * time.Millisecond,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(result{Code: 137, Signal: "SIGKILL", TimedOut: true}, resultOf(exit)); diff != "" {
		t.Errorf("Exec (-want +got):\n%s", diff)
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	waitGone(t, pidOf(t, b))
}

// TestBridgeStopLoopIsFast plays how the host stops a background bridge:
// the killed orphan must be reaped at once, or kill -0 keeps succeeding
// (an orphan left a zombie stays "alive" for all 200 polls). The loop's
// polls are counted, not timed: the reaping, not the machine's load, is
// what is tested.
func TestBridgeStopLoopIsFast(t *testing.T) {
	s := startServer(t, nil)
	c, _ := clientFor(t, s)
	exit, err := execOut(execCtx(t), c, cmdclient.Command{Argv: []string{"sh", "-c", "nohup sleep 300 >/dev/null 2>&1 & echo $!"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	pid := strings.TrimSpace(string(exit.Stdout))
	exit, err = execOut(execCtx(t), c, cmdclient.Command{
		Argv: []string{"sh", "-c", `kill $0; n=0; while kill -0 $0 2>/dev/null && [ $n -lt 200 ]; do sleep 0.01; n=$((n+1)); done; echo $n`, pid},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	polls, err := strconv.Atoi(strings.TrimSpace(string(exit.Stdout)))
	if err != nil {
		t.Fatalf("stop loop printed %q", exit.Stdout)
	}
	t.Logf("stop loop: %d polls", polls)
	if polls >= 50 {
		t.Errorf("the killed orphan was still there after %d polls of kill -0 (200 is the loop's cap); want it reaped at once", polls)
	}
}

func TestSignalAndCancel(t *testing.T) {
	s := startServer(t, nil)
	c, _ := clientFor(t, s)

	p, err := c.Start(cmdclient.Command{Argv: []string{"sh", "-c", "echo ready; exec sleep 300"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Signal(execCtx(t), "TERM"); err != nil {
		t.Fatal(err)
	}
	exit, err := p.Wait(execCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if exit.Signal != "SIGTERM" || exit.Code != 143 {
		t.Errorf("after Signal TERM: %+v, want SIGTERM, 143", resultOf(ran{Exit: exit}))
	}

	pidFile := filepath.Join(t.TempDir(), "pid")
	ctx, cancel := context.WithCancel(execCtx(t))
	started := make(chan struct{})
	var once sync.Once
	errc := make(chan error, 1)
	go func() {
		_, err := execOut(ctx, c, cmdclient.Command{Argv: []string{"sh", "-c", `sleep 300 & echo $! > "$0"; echo go; wait`, pidFile}},
			func(int, []byte) { once.Do(func() { close(started) }) })
		errc <- err
	}()
	<-started
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled Exec: %v, want context.Canceled", err)
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	waitGone(t, pidOf(t, b))
}

// TestReconnectMidCommand breaks the stream while output is in flight: the
// client reopens it, re-attaches, and gets every byte exactly once.
func TestReconnectMidCommand(t *testing.T) {
	s := startServer(t, nil)
	c, o := clientFor(t, s)
	var live [2]bytes.Buffer
	var once sync.Once
	exit, err := execOut(execCtx(t), c, cmdclient.Command{
		Argv: []string{"sh", "-c", "seq 1 300000; seq 1 200000 >&2; sleep 0.2; seq 300001 400000"},
	}, func(st int, p []byte) {
		live[st-1].Write(p)
		if live[0].Len() > 1<<20 {
			// From the reader itself, while the server pumps: frames
			// are in flight and in the client's read buffer.
			once.Do(o.breakStream)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	wantOut, wantErr := seqOutput(1, 400000), seqOutput(1, 200000)
	for _, c := range []struct {
		name      string
		got, want []byte
	}{
		{"Exit.Stdout", exit.Stdout, wantOut},
		{"Exit.Stderr", exit.Stderr, wantErr},
		{"live stdout", live[0].Bytes(), wantOut},
		{"live stderr", live[1].Bytes(), wantErr},
	} {
		if !bytes.Equal(c.got, c.want) {
			t.Errorf("%s: %d bytes, want %d bytes of seq output (first difference at %d)", c.name, len(c.got), len(c.want), firstDiff(c.got, c.want))
		}
	}
	if got := c.Stats().Opens; got != 2 {
		t.Errorf("Opens = %d, want 2 after one break", got)
	}
	// The stream is usable again.
	exit, err = execOut(execCtx(t), c, cmdclient.Command{Argv: []string{"echo", "again"}}, nil)
	if err != nil || string(exit.Stdout) != "again\n" {
		t.Errorf("Exec after reconnect = %+v, %v", resultOf(exit), err)
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// TestReconnectCommandEndedMeanwhile breaks the stream and lets the
// command end before the stream is back: Attach then replays and Exits.
func TestReconnectCommandEndedMeanwhile(t *testing.T) {
	s := startServer(t, nil)
	o := &connOpener{socket: s.socket}
	var reopens atomic.Int32
	c := newClient(t, o.open, func(opts *cmdclient.Options) {
		opts.Backoff = 300 * time.Millisecond
		opts.OnReopen = func() { reopens.Add(1) }
	})
	var once sync.Once
	exit, err := execOut(execCtx(t), c, cmdclient.Command{Argv: []string{"sh", "-c", "echo first; sleep 0.05; echo second >&2"}},
		func(int, []byte) { once.Do(o.breakStream) })
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(result{Stdout: "first\n", Stderr: "second\n"}, resultOf(exit)); diff != "" {
		t.Errorf("Exec (-want +got):\n%s", diff)
	}
	if got := c.Stats().Opens; got != 2 {
		t.Errorf("Opens = %d, want 2", got)
	}
	if got := reopens.Load(); got != 1 {
		t.Errorf("OnReopen called %d times, want 1", got)
	}
}

func TestReconnectGivesUp(t *testing.T) {
	s := startServer(t, nil)
	o := &connOpener{socket: s.socket}
	c := newClient(t, o.open, func(opts *cmdclient.Options) { opts.ReconnectTimeout = 200 * time.Millisecond })
	p, err := c.Start(cmdclient.Command{Argv: []string{"sleep", "300"}})
	if err != nil {
		t.Fatal(err)
	}
	o.mu.Lock()
	o.fail = true
	o.mu.Unlock()
	o.breakStream()
	start := time.Now()
	_, err = p.Wait(execCtx(t))
	if err == nil || !strings.Contains(err.Error(), "could not be reopened within 200ms") {
		t.Errorf("Wait: %v, want a reconnect failure", err)
	}
	// Not given up, it would wait for the 300 s sleep: the bound tells
	// the two apart on a loaded machine.
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("Wait failed after %v, want about the 200ms ReconnectTimeout", d)
	}
	if _, err := execOut(execCtx(t), c, cmdclient.Command{Argv: []string{"true"}}, nil); err == nil {
		t.Error("Exec on a client that gave up succeeded")
	}
}

// pipeOpener relays through cmdserver.Attach run in-process on io.Pipes.
func pipeOpener(socket string) cmdclient.Opener {
	return func(ctx context.Context) (io.ReadWriteCloser, error) {
		inR, inW := io.Pipe()
		outR, outW := io.Pipe()
		go func() {
			err := cmdserver.Attach(ctx, cmdserver.AttachOptions{Socket: socket, Stdin: inR, Stdout: outW, Logger: slog.New(slog.DiscardHandler)})
			outW.CloseWithError(fmt.Errorf("relay ended: %w", err))
		}()
		return &pipeStream{r: outR, w: inW}, nil
	}
}

type pipeStream struct {
	r *io.PipeReader
	w *io.PipeWriter
}

func (p *pipeStream) Read(b []byte) (int, error)  { return p.r.Read(b) }
func (p *pipeStream) Write(b []byte) (int, error) { return p.w.Write(b) }
func (p *pipeStream) Close() error {
	p.w.Close()
	p.r.Close()
	return nil
}

func TestAttachRelayInProcess(t *testing.T) {
	s := startServer(t, nil)
	c := newClient(t, pipeOpener(s.socket), nil)
	exit, err := execOut(execCtx(t), c, cmdclient.Command{Argv: []string{"cat"}, Stdin: bytes.NewReader([]byte("via relay"))}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(result{Stdout: "via relay"}, resultOf(exit)); diff != "" {
		t.Errorf("Exec (-want +got):\n%s", diff)
	}
}

// subprocessOpener runs `sandbox-server attach --spawn` as a subprocess of
// the test binary, like a Kubernetes exec would.
type subprocessOpener struct {
	socket string
	mu     sync.Mutex
	procs  []*os.Process
	exits  []chan error
}

func (o *subprocessOpener) open(ctx context.Context) (io.ReadWriteCloser, error) {
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	p, err := os.StartProcess(os.Args[0], []string{os.Args[0], "sandbox-server", "attach", "--socket", o.socket, "--spawn"},
		&os.ProcAttr{Files: []*os.File{inR, outW, os.Stderr}})
	inR.Close()
	outW.Close()
	if err != nil {
		return nil, err
	}
	done := make(chan error, 1)
	go func() {
		st, err := p.Wait()
		if err == nil && !st.Success() {
			err = errors.New(st.String())
		}
		done <- err
	}()
	o.mu.Lock()
	o.procs = append(o.procs, p)
	o.exits = append(o.exits, done)
	o.mu.Unlock()
	return &fileStream{r: outR, w: inW}, nil
}

type fileStream struct{ r, w *os.File }

func (f *fileStream) Read(b []byte) (int, error)  { return f.r.Read(b) }
func (f *fileStream) Write(b []byte) (int, error) { return f.w.Write(b) }
func (f *fileStream) Close() error {
	f.w.Close()
	return f.r.Close()
}

// TestAttachRelaySpawnsServer runs the relay as a subprocess with --spawn
// on a socket nobody serves: it starts a detached server (in a new
// session) that outlives the relay, and a second relay reaches the same
// server.
func TestAttachRelaySpawnsServer(t *testing.T) {
	socket := tempSocket(t)
	o := &subprocessOpener{socket: socket}
	c1 := newClient(t, o.open, nil)
	exit, err := execOut(execCtx(t), c1, cmdclient.Command{Argv: []string{"sh", "-c", "echo $PPID; cut -d' ' -f6 /proc/$PPID/stat"}}, nil)
	if err != nil || exit.Code != 0 {
		t.Fatalf("Exec = %+v, %v", resultOf(exit), err)
	}
	fields := strings.Fields(string(exit.Stdout))
	if len(fields) != 2 {
		t.Fatalf("server pid and session: %q", exit.Stdout)
	}
	serverPID := pidOf(t, []byte(fields[0]))
	if fields[0] != fields[1] {
		t.Errorf("server %s is in session %s, want its own session", fields[0], fields[1])
	}
	if serverPID == o.procs[0].Pid {
		t.Errorf("the relay (pid %d) serves commands itself", serverPID)
	}
	// It belongs to the relay's parent (here this test; on kwok the node's
	// agent) and ends with it.
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", serverPID))
	if want := fmt.Sprintf("\x00--owner-pid\x00%d\x00", os.Getpid()); err != nil || !strings.Contains(string(cmdline), want) {
		t.Errorf("server's command line %q (%v), want it to hold %q", cmdline, err, want)
	}
	fi, err := os.Stat(socket)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("socket mode %v, want 0600", fi.Mode().Perm())
	}

	// The first relay ends when its stream is closed; the server stays.
	c1.Close()
	if err := <-o.exits[0]; err != nil {
		t.Errorf("first relay: %v", err)
	}
	if !alive(serverPID) {
		t.Fatalf("server %d ended with the relay", serverPID)
	}

	c2 := newClient(t, o.open, nil)
	exit, err = execOut(execCtx(t), c2, cmdclient.Command{Argv: []string{"sh", "-c", "echo $PPID"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := pidOf(t, exit.Stdout); got != serverPID {
		t.Errorf("second relay reached server %d, want %d", got, serverPID)
	}
	if err := c2.Shutdown(execCtx(t)); err != nil {
		t.Fatal(err)
	}
	// The relay exits 0 when the server closes the socket, without stdin EOF.
	if err := <-o.exits[1]; err != nil {
		t.Errorf("second relay: %v", err)
	}
	waitExited(t, serverPID)
}

// waitExited waits up to 2 s for pid to exit. The detached server may be
// re-parented to this test process (a subreaper once a server ran here) or
// to an init that does not reap: a zombie counts as exited.
func waitExited(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for {
		var ws unix.WaitStatus
		unix.Wait4(pid, &ws, unix.WNOHANG, nil) // reap it if it is our child
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return
		}
		if f := strings.Fields(string(b)); len(f) > 2 && f[2] == "Z" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %d still running", pid)
		}
		time.Sleep(5 * time.Millisecond) // waiting for it to exit
	}
}

// BenchmarkExecRoundTrip runs `true` over one stream to an in-process
// server; compare with BenchmarkBareForkExec.
func BenchmarkExecRoundTrip(b *testing.B) {
	s := startServer(b, nil)
	c, _ := clientFor(b, s)
	ctx := context.Background()
	start := time.Now()
	for b.Loop() {
		exit, err := execOut(ctx, c, cmdclient.Command{Argv: []string{"true"}}, nil)
		if err != nil || exit.Code != 0 {
			b.Fatalf("Exec = %+v, %v", exit, err)
		}
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "execs/s")
	b.ReportMetric(float64(c.Stats().Opens), "opens")
}

// BenchmarkBareForkExec runs `true` with os.StartProcess and Wait, no
// server: the floor of BenchmarkExecRoundTrip.
func BenchmarkBareForkExec(b *testing.B) {
	path := "/usr/bin/true"
	for b.Loop() {
		p, err := os.StartProcess(path, []string{"true"}, &os.ProcAttr{})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := p.Wait(); err != nil {
			b.Fatal(err)
		}
	}
}
