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
//
// Serve reaps every child of its process with wait4(-1): do not start and
// wait for other child processes in the same process while it runs.
package cmdserver

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/pcsync/pcsync/internal/safefile"
	"github.com/pcsync/pcsync/pkg/sandbox/wire"
)

// DefaultSocket is where the server listens in a sandbox pod.
const DefaultSocket = "/run/pcsync/sandbox.sock"

// ErrAlreadyRunning is returned by Serve when another server holds the
// socket's lock file.
var ErrAlreadyRunning = errors.New("cmdserver: another server is running on this socket")

// Options configures Serve.
type Options struct {
	// Socket is the Unix socket to listen on. Its directory is created
	// 0700 if missing; the socket is 0600; a stale socket file is
	// replaced. A lock file Socket+".lock" keeps a second server away.
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
	// Logger receives structured logs; nil: text to stderr.
	Logger *slog.Logger
}

// DefaultOptions returns the options of a server in a sandbox pod.
func DefaultOptions() Options {
	return Options{
		Socket:    DefaultSocket,
		MaxBuffer: 64 << 20,
		Drain:     50 * time.Millisecond,
		KillWait:  2 * time.Second,
	}
}

// chunkSize is the largest Stdout/Stderr payload the server sends.
const chunkSize = 64 << 10

type server struct {
	opts    Options
	log     *slog.Logger
	environ []string

	// procMu is held across fork and wait4 so that the reaper always
	// finds a pid it reaps in procs.
	procMu sync.Mutex
	procs  map[int]*command

	mu      sync.Mutex
	cmds    map[uint32]*command
	pgids   map[int]struct{}
	conns   map[*conn]struct{}
	closing bool

	quit     chan struct{}
	quitOnce sync.Once
	wg       sync.WaitGroup
}

// Serve runs the command server until ctx is done or a client sends
// Shutdown; either way it SIGKILLs every process group it started and
// returns nil. It returns an error when it cannot listen.
func Serve(ctx context.Context, opts Options) error {
	if opts.Socket == "" {
		return errors.New("cmdserver: no socket path")
	}
	def := DefaultOptions()
	if opts.MaxBuffer <= 0 {
		opts.MaxBuffer = def.MaxBuffer
	}
	if opts.Drain <= 0 {
		opts.Drain = def.Drain
	}
	if opts.KillWait <= 0 {
		opts.KillWait = def.KillWait
	}
	s := &server{
		opts:    opts,
		log:     opts.Logger,
		environ: opts.Environ,
		procs:   map[int]*command{},
		cmds:    map[uint32]*command{},
		pgids:   map[int]struct{}{},
		conns:   map[*conn]struct{}{},
		quit:    make(chan struct{}),
	}
	if s.log == nil {
		s.log = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	if s.environ == nil {
		s.environ = os.Environ()
	}
	ln, unlock, err := listen(opts.Socket)
	if err != nil {
		return err
	}
	defer unlock()
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		s.log.Warn("cannot become child subreaper; orphans will not be reaped", slog.Any("error", err))
	}
	reaperStop := make(chan struct{})
	reaperDone := make(chan struct{})
	go func() {
		defer close(reaperDone)
		s.reapLoop(reaperStop)
	}()
	s.log.Info("command server listening", slog.String("socket", opts.Socket), slog.Int("pid", os.Getpid()))

	go s.acceptLoop(ln)
	select {
	case <-ctx.Done():
		s.log.Info("command server stopping", slog.String("reason", "context done"))
	case <-s.quit:
		s.log.Info("command server stopping", slog.String("reason", "shutdown requested"))
	}
	ln.Close()
	s.killAll()
	s.mu.Lock()
	s.closing = true
	var flush []*conn
	for cn := range s.conns {
		if cn.bye {
			flush = append(flush, cn)
		} else {
			cn.closeLocked()
		}
	}
	for _, c := range s.cmds {
		c.space.Broadcast()
		c.stdinCond.Broadcast()
	}
	s.mu.Unlock()
	// Let Bye reach the client that asked for the shutdown.
	deadline := time.After(time.Second)
	for _, cn := range flush {
		select {
		case <-cn.sendDone:
		case <-deadline:
		}
		cn.nc.Close()
	}
	close(reaperStop)
	<-reaperDone
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Second):
		s.log.Warn("command server stopped with pipe readers still running")
	}
	s.log.Info("command server stopped")
	return nil
}

// listen locks Socket+".lock", replaces a stale socket and listens.
func listen(socket string) (net.Listener, func(), error) {
	dir := filepath.Dir(socket)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, nil, fmt.Errorf("cmdserver: create socket directory: %w", err)
	}
	lock, err := safefile.TryLock(socket+".lock", 0o600)
	if errors.Is(err, safefile.ErrLocked) {
		return nil, nil, fmt.Errorf("%w: %s", ErrAlreadyRunning, socket)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("cmdserver: %w", err)
	}
	if err := os.Remove(socket); err != nil && !errors.Is(err, os.ErrNotExist) {
		lock.Unlock()
		return nil, nil, fmt.Errorf("cmdserver: remove stale socket: %w", err)
	}
	ln, err := net.Listen("unix", socket)
	if err != nil {
		lock.Unlock()
		return nil, nil, fmt.Errorf("cmdserver: listen: %w", err)
	}
	if err := os.Chmod(socket, 0o600); err != nil {
		ln.Close()
		lock.Unlock()
		return nil, nil, fmt.Errorf("cmdserver: chmod socket: %w", err)
	}
	return ln, func() { lock.Unlock() }, nil
}

func (s *server) stop() { s.quitOnce.Do(func() { close(s.quit) }) }

func (s *server) acceptLoop(ln net.Listener) {
	for {
		nc, err := ln.Accept()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				s.log.Error("accept", slog.Any("error", err))
				s.stop()
			}
			return
		}
		cn := &conn{s: s, nc: nc, queued: map[*command]bool{}, wake: make(chan struct{}, 1), done: make(chan struct{}), sendDone: make(chan struct{})}
		s.mu.Lock()
		if s.closing {
			s.mu.Unlock()
			nc.Close()
			continue
		}
		s.conns[cn] = struct{}{}
		s.mu.Unlock()
		s.log.Debug("connection accepted")
		go cn.sendLoop()
		go cn.readLoop()
	}
}

// reapLoop reaps every child whenever SIGCHLD arrives and dispatches the
// statuses of the commands' main processes.
func (s *server) reapLoop(stop <-chan struct{}) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGCHLD)
	defer signal.Stop(ch)
	for {
		s.reapAll()
		select {
		case <-ch:
		case <-stop:
			s.reapAll()
			return
		}
	}
}

func (s *server) reapAll() {
	for {
		var ws unix.WaitStatus
		s.procMu.Lock()
		pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
		var c *command
		if pid > 0 {
			c = s.procs[pid]
			delete(s.procs, pid)
		}
		s.procMu.Unlock()
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil || pid <= 0 {
			return
		}
		if c == nil {
			s.log.Debug("reaped orphan", slog.Int("pid", pid))
			continue
		}
		s.exited(c, ws)
	}
}

// killAll SIGKILLs every process group the server started and waits up to
// KillWait for them to be gone (reaped). A group is known by its leader's
// pid; one whose processes all ended before is dropped when its command is
// forgotten, so a reused pid is rarely hit.
func (s *server) killAll() {
	s.mu.Lock()
	groups := make([]int, 0, len(s.pgids))
	for g := range s.pgids {
		groups = append(groups, g)
	}
	s.mu.Unlock()
	for _, g := range groups {
		if err := unix.Kill(-g, unix.SIGKILL); err == nil {
			s.log.Debug("killed process group", slog.Int("pgid", g))
		}
	}
	deadline := time.Now().Add(s.opts.KillWait)
	for len(groups) > 0 && time.Now().Before(deadline) {
		groups = slices.DeleteFunc(groups, func(g int) bool {
			return errors.Is(unix.Kill(-g, 0), unix.ESRCH)
		})
		if len(groups) > 0 {
			time.Sleep(5 * time.Millisecond) // waiting for the reaper
		}
	}
	if len(groups) > 0 {
		s.log.Warn("process groups still present after SIGKILL", slog.Any("pgids", groups))
	}
	s.mu.Lock()
	for g := range s.pgids {
		if !slices.Contains(groups, g) {
			delete(s.pgids, g)
		}
	}
	s.mu.Unlock()
}

// outBuf is one stream's kept output: data holds bytes [base, base+len).
type outBuf struct {
	data []byte
	base int64
}

func (b *outBuf) end() int64 { return b.base + int64(len(b.data)) }

// command is one started command. Its fields are guarded by server.mu.
type command struct {
	id  uint32
	pid int

	out  [2]outBuf
	conn *conn
	// sent is, per stream, the offset up to which output went to conn.
	sent     [2]int64
	exitSent bool

	pipes [2]*os.File
	eof   [2]bool
	// exited: the main process was reaped (or never started).
	exited bool
	exit   wire.ExitPayload
	// done: exited and both pipes drained; Exit may be sent.
	done     bool
	released bool
	timer    *time.Timer
	space    *sync.Cond

	stdinOn     bool
	stdinBufs   [][]byte
	stdinClosed bool
	stdinCond   *sync.Cond
}

func (c *command) kept() int64 { return int64(len(c.out[0].data) + len(c.out[1].data)) }

func (s *server) newCommand(id uint32, cn *conn) *command {
	return &command{id: id, conn: cn, space: sync.NewCond(&s.mu), stdinCond: sync.NewCond(&s.mu)}
}

// start handles a Start frame.
func (s *server) start(cn *conn, id uint32, p wire.StartPayload) {
	s.mu.Lock()
	if _, dup := s.cmds[id]; dup {
		s.mu.Unlock()
		cn.sendError(id, fmt.Sprintf("command %d: id already in use", id))
		return
	}
	c := s.newCommand(id, cn)
	c.stdinOn = p.Stdin
	s.cmds[id] = c
	s.mu.Unlock()
	log := s.log.With(slog.Uint64("id", uint64(id)))
	if err := s.spawn(c, p); err != nil {
		code := 126
		if errors.Is(err, os.ErrNotExist) || errors.Is(err, errNotFound) {
			code = 127
		}
		log.Info("command failed to start", slog.Any("error", err), slog.Int("exitCode", code))
		s.mu.Lock()
		c.exited, c.eof = true, [2]bool{true, true}
		c.exit = wire.ExitPayload{ExitCode: code, Error: err.Error()}
		s.maybeDone(c)
		s.mu.Unlock()
		return
	}
	log.Debug("command started", slog.Int("pid", c.pid), slog.String("argv0", p.Argv[0]))
}

var errNotFound = errors.New("executable file not found in $PATH")

func (s *server) spawn(c *command, p wire.StartPayload) error {
	if len(p.Argv) == 0 || p.Argv[0] == "" {
		return errors.New("start: empty argv")
	}
	env := s.buildEnv(p)
	if p.Cwd != "" {
		fi, err := os.Stat(p.Cwd)
		if err != nil {
			return fmt.Errorf("start: cwd: %w", err)
		}
		if !fi.IsDir() {
			return fmt.Errorf("start: cwd %s: not a directory", p.Cwd)
		}
	}
	path, err := lookPath(p.Argv[0], env, s.environ)
	if err != nil {
		return fmt.Errorf("start: %w", err)
	}
	var stdinR, stdinW *os.File
	if p.Stdin {
		stdinR, stdinW, err = os.Pipe()
	} else {
		stdinR, err = os.Open(os.DevNull)
	}
	if err != nil {
		return fmt.Errorf("start: stdin: %w", err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		stdinR.Close()
		closeFile(stdinW)
		return fmt.Errorf("start: stdout pipe: %w", err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		stdinR.Close()
		closeFile(stdinW)
		outR.Close()
		outW.Close()
		return fmt.Errorf("start: stderr pipe: %w", err)
	}
	s.mu.Lock()
	c.pipes = [2]*os.File{outR, errR}
	s.mu.Unlock()
	attr := &syscall.ProcAttr{
		Dir:   p.Cwd,
		Env:   env,
		Files: []uintptr{stdinR.Fd(), outW.Fd(), errW.Fd()},
		Sys:   &syscall.SysProcAttr{Setpgid: true},
	}
	s.procMu.Lock()
	pid, err := syscall.ForkExec(path, p.Argv, attr)
	if err == nil {
		s.procs[pid] = c
		s.mu.Lock()
		c.pid = pid
		s.pgids[pid] = struct{}{}
		if p.TimeoutMs > 0 {
			c.timer = time.AfterFunc(time.Duration(p.TimeoutMs)*time.Millisecond, func() { s.timeout(c) })
		}
		s.mu.Unlock()
	}
	s.procMu.Unlock()
	stdinR.Close()
	outW.Close()
	errW.Close()
	if err != nil {
		closeFile(stdinW)
		outR.Close()
		errR.Close()
		s.mu.Lock()
		c.pipes = [2]*os.File{}
		s.mu.Unlock()
		return fmt.Errorf("start %s: %w", path, err)
	}
	s.wg.Add(2)
	go s.readPipe(c, 0, outR)
	go s.readPipe(c, 1, errR)
	if stdinW != nil {
		s.wg.Add(1)
		go s.writeStdin(c, stdinW)
	}
	return nil
}

func closeFile(f *os.File) {
	if f != nil {
		f.Close()
	}
}

func (s *server) buildEnv(p wire.StartPayload) []string {
	m := map[string]string{}
	if p.BaseEnv {
		for _, kv := range s.environ {
			k, v, _ := strings.Cut(kv, "=")
			m[k] = v
		}
	}
	for k, v := range p.Env {
		m[k] = v
	}
	env := make([]string, 0, len(m))
	for k, v := range m {
		env = append(env, k+"="+v)
	}
	sort.Strings(env)
	return env
}

// lookPath resolves a name without a slash in the command's PATH (the
// server's if the command has none).
func lookPath(name string, env, serverEnv []string) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	path, ok := envValue(env, "PATH")
	if !ok {
		path, _ = envValue(serverEnv, "PATH")
	}
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			dir = "."
		}
		p := filepath.Join(dir, name)
		fi, err := os.Stat(p)
		if err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("exec %q: %w", name, errNotFound)
}

func envValue(env []string, key string) (string, bool) {
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok && k == key {
			return v, true
		}
	}
	return "", false
}

// timeout SIGKILLs the command's process group.
func (s *server) timeout(c *command) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c.exited {
		return
	}
	c.exit.TimedOut = true
	s.log.Info("command timed out", slog.Uint64("id", uint64(c.id)), slog.Int("pid", c.pid))
	unix.Kill(-c.pid, unix.SIGKILL)
}

// exited records the main process's status and bounds the pipe drain.
func (s *server) exited(c *command, ws unix.WaitStatus) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c.exited = true
	if c.timer != nil {
		c.timer.Stop()
	}
	switch {
	case ws.Exited():
		c.exit.ExitCode = ws.ExitStatus()
	case ws.Signaled():
		c.exit.ExitCode = 128 + int(ws.Signal())
		c.exit.Signal = unix.SignalName(ws.Signal())
	}
	deadline := time.Now().Add(s.opts.Drain)
	for _, p := range c.pipes {
		if p != nil {
			p.SetReadDeadline(deadline)
		}
	}
	s.log.Debug("command exited", slog.Uint64("id", uint64(c.id)), slog.Int("pid", c.pid), slog.Int("exitCode", c.exit.ExitCode), slog.String("signal", c.exit.Signal))
	s.maybeDone(c)
}

// maybeDone marks c done once its main process exited and both pipes are
// drained. s.mu is held.
func (s *server) maybeDone(c *command) {
	if c.done || !c.exited || !c.eof[0] || !c.eof[1] {
		return
	}
	c.done = true
	c.stdinCond.Broadcast()
	if c.released {
		s.forget(c)
		return
	}
	c.markDirty()
}

// forget drops a released, done command, and its process group once no
// background process is left in it. s.mu is held.
func (s *server) forget(c *command) {
	delete(s.cmds, c.id)
	c.out = [2]outBuf{}
	if c.pid > 0 && errors.Is(unix.Kill(-c.pid, 0), unix.ESRCH) {
		delete(s.pgids, c.pid)
	}
}

func (s *server) readPipe(c *command, i int, f *os.File) {
	defer s.wg.Done()
	buf := make([]byte, 32<<10)
	for {
		n, err := f.Read(buf)
		if n > 0 {
			s.appendOut(c, i, buf[:n])
		}
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, os.ErrDeadlineExceeded) {
				s.log.Warn("read command output", slog.Uint64("id", uint64(c.id)), slog.Any("error", err))
			}
			break
		}
	}
	s.mu.Lock()
	c.pipes[i] = nil
	f.Close()
	c.eof[i] = true
	s.maybeDone(c)
	s.mu.Unlock()
}

// appendOut keeps p as c's output on stream i, within MaxBuffer.
func (s *server) appendOut(c *command, i int, p []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for !c.released && !s.closing && c.kept() > 0 && c.kept()+int64(len(p)) > s.opts.MaxBuffer {
		c.trimSent()
		if c.kept()+int64(len(p)) <= s.opts.MaxBuffer {
			break
		}
		c.space.Wait()
	}
	if c.released {
		return
	}
	c.out[i].data = append(c.out[i].data, p...)
	c.markDirty()
}

// trimSent discards the output already written to a connection.
func (c *command) trimSent() {
	for i := range c.out {
		b := &c.out[i]
		if n := c.sent[i] - b.base; n > 0 {
			b.data = append([]byte(nil), b.data[n:]...)
			b.base = c.sent[i]
		}
	}
}

func (s *server) writeStdin(c *command, f *os.File) {
	defer s.wg.Done()
	defer f.Close()
	broken := false
	for {
		s.mu.Lock()
		for len(c.stdinBufs) == 0 && !c.stdinClosed && !c.done && !s.closing {
			c.stdinCond.Wait()
		}
		if len(c.stdinBufs) == 0 {
			s.mu.Unlock()
			return
		}
		p := c.stdinBufs[0]
		c.stdinBufs = c.stdinBufs[1:]
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

// conn is one client connection.
type conn struct {
	s  *server
	nc net.Conn

	// Guarded by s.mu.
	ctrl   []wire.Frame
	queue  []*command
	queued map[*command]bool
	closed bool
	bye    bool

	wake     chan struct{}
	done     chan struct{}
	sendDone chan struct{}
}

func (cn *conn) wakeUp() {
	select {
	case cn.wake <- struct{}{}:
	default:
	}
}

func (cn *conn) sendCtrl(f wire.Frame) {
	cn.s.mu.Lock()
	defer cn.s.mu.Unlock()
	cn.ctrl = append(cn.ctrl, f)
	cn.wakeUp()
}

func (cn *conn) sendError(id uint32, msg string) {
	cn.sendCtrl(wire.JSON(wire.Error, id, wire.ErrorPayload{Message: msg}))
}

// closeLocked closes the connection and detaches its commands. s.mu is
// held.
func (cn *conn) closeLocked() {
	if cn.closed {
		return
	}
	cn.closed = true
	close(cn.done)
	cn.nc.Close()
	delete(cn.s.conns, cn)
	for _, c := range cn.s.cmds {
		if c.conn == cn {
			c.conn = nil
			c.space.Broadcast()
		}
	}
}

func (cn *conn) close() {
	cn.s.mu.Lock()
	defer cn.s.mu.Unlock()
	cn.closeLocked()
}

// next returns the next frame to send, or false if there is none now.
func (cn *conn) next() (wire.Frame, bool) {
	s := cn.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(cn.ctrl) > 0 {
		f := cn.ctrl[0]
		cn.ctrl = cn.ctrl[1:]
		return f, true
	}
	for len(cn.queue) > 0 {
		c := cn.queue[0]
		cn.queue = cn.queue[1:]
		delete(cn.queued, c)
		if c.conn != cn {
			continue
		}
		for i, typ := range [2]wire.Type{wire.Stdout, wire.Stderr} {
			b := &c.out[i]
			if c.sent[i] >= b.end() {
				continue
			}
			from := c.sent[i] - b.base
			to := min(int64(len(b.data)), from+chunkSize)
			// The slice is not copied: appends never write below len.
			f := wire.Frame{Type: typ, ID: c.id, Payload: b.data[from:to:to]}
			c.sent[i] = b.base + to
			c.space.Broadcast()
			c.markDirty()
			return f, true
		}
		if c.done && !c.exitSent {
			c.exitSent = true
			return wire.JSON(wire.Exit, c.id, c.exit), true
		}
	}
	return wire.Frame{}, false
}

func (cn *conn) sendLoop() {
	defer close(cn.sendDone)
	for {
		f, ok := cn.next()
		if !ok {
			select {
			case <-cn.wake:
				continue
			case <-cn.done:
				return
			}
		}
		if err := wire.Write(cn.nc, f); err != nil {
			cn.s.log.Debug("connection write failed", slog.Any("error", err))
			cn.close()
			return
		}
		if f.Type == wire.Bye {
			return
		}
	}
}

func (cn *conn) readLoop() {
	r := wire.NewReader(bufio.NewReaderSize(cn.nc, 64<<10))
	for {
		f, err := r.Read()
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				cn.s.log.Debug("connection read failed", slog.Any("error", err))
			}
			break
		}
		if cn.handle(f) {
			return
		}
	}
	cn.close()
	cn.s.log.Debug("connection closed")
}

// handle serves one frame; true means stop reading (shutdown).
func (cn *conn) handle(f wire.Frame) bool {
	s := cn.s
	switch f.Type {
	case wire.Hello:
		var p wire.HelloPayload
		if err := f.Decode(&p); err != nil {
			cn.sendError(0, err.Error())
			return false
		}
		s.mu.Lock()
		running := make([]uint32, 0, len(s.cmds))
		for id := range s.cmds {
			running = append(running, id)
		}
		s.mu.Unlock()
		slices.Sort(running)
		cn.sendCtrl(wire.JSON(wire.HelloOK, 0, wire.HelloOKPayload{Version: wire.Version, PID: os.Getpid(), Running: running}))
	case wire.Start:
		var p wire.StartPayload
		if err := f.Decode(&p); err != nil {
			cn.sendError(f.ID, err.Error())
			return false
		}
		s.start(cn, f.ID, p)
	case wire.Stdin, wire.StdinClose:
		s.mu.Lock()
		c := s.cmds[f.ID]
		switch {
		case c == nil:
			s.mu.Unlock()
			cn.sendError(f.ID, fmt.Sprintf("%v: unknown command %d", f.Type, f.ID))
			return false
		case !c.stdinOn:
			s.mu.Unlock()
			cn.sendError(f.ID, fmt.Sprintf("%v: command %d was started without stdin", f.Type, f.ID))
			return false
		case f.Type == wire.Stdin && !c.stdinClosed && !c.done && len(f.Payload) > 0:
			c.stdinBufs = append(c.stdinBufs, f.Payload)
		case f.Type == wire.StdinClose:
			c.stdinClosed = true
		}
		c.stdinCond.Broadcast()
		s.mu.Unlock()
	case wire.Signal:
		var p wire.SignalPayload
		if err := f.Decode(&p); err != nil {
			cn.sendError(f.ID, err.Error())
			return false
		}
		sig, ok := signals[strings.TrimPrefix(p.Signal, "SIG")]
		if !ok {
			cn.sendError(f.ID, fmt.Sprintf("signal %q: want TERM, KILL, INT or HUP", p.Signal))
			return false
		}
		s.mu.Lock()
		c := s.cmds[f.ID]
		pid := 0
		if c != nil {
			pid = c.pid
		}
		s.mu.Unlock()
		if c == nil {
			cn.sendError(f.ID, fmt.Sprintf("Signal: unknown command %d", f.ID))
			return false
		}
		if pid > 0 {
			unix.Kill(-pid, sig)
		}
	case wire.Attach:
		var p wire.AttachPayload
		if err := f.Decode(&p); err != nil {
			cn.sendError(f.ID, err.Error())
			return false
		}
		if msg := s.attach(cn, f.ID, [2]int64{p.Stdout, p.Stderr}); msg != "" {
			cn.sendError(f.ID, msg)
		}
	case wire.Release:
		s.mu.Lock()
		if c := s.cmds[f.ID]; c != nil {
			c.released = true
			c.space.Broadcast()
			if c.done {
				s.forget(c)
			}
		}
		s.mu.Unlock()
	case wire.Ping:
		cn.sendCtrl(wire.Frame{Type: wire.Pong, ID: f.ID})
	case wire.Shutdown:
		s.log.Info("shutdown requested")
		s.killAll()
		s.mu.Lock()
		cn.bye = true
		cn.ctrl = append(cn.ctrl, wire.Frame{Type: wire.Bye})
		cn.wakeUp()
		s.mu.Unlock()
		s.stop()
		return true
	default:
		cn.sendError(f.ID, fmt.Sprintf("unexpected frame type %v", f.Type))
	}
	return false
}

var signals = map[string]unix.Signal{"TERM": unix.SIGTERM, "KILL": unix.SIGKILL, "INT": unix.SIGINT, "HUP": unix.SIGHUP}

// attach makes cn the destination of command id's output from offsets on;
// it returns an error message, or "".
func (s *server) attach(cn *conn, id uint32, offsets [2]int64) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.cmds[id]
	if c == nil {
		return fmt.Sprintf("Attach: unknown command %d", id)
	}
	c.conn = cn
	c.exitSent = false
	var msg string
	for i, name := range [2]string{"stdout", "stderr"} {
		off := offsets[i]
		b := &c.out[i]
		switch {
		case off < b.base:
			msg = fmt.Sprintf("Attach: %s bytes %d to %d of command %d were discarded (buffer cap %d bytes)", name, off, b.base, id, s.opts.MaxBuffer)
			off = b.base
		case off > b.end():
			msg = fmt.Sprintf("Attach: %s offset %d of command %d is past its output (%d bytes)", name, off, id, b.end())
			off = b.end()
		}
		c.sent[i] = off
	}
	c.space.Broadcast()
	c.markDirty()
	return msg
}
