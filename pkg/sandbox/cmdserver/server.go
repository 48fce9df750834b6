package cmdserver

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// ErrAlreadyRunning is returned by Serve when another server holds the
// socket's lock file.
var ErrAlreadyRunning = errors.New("cmdserver: another server is running on this socket")

// chunkSize is the largest Stdout/Stderr payload the server sends.
const chunkSize = 64 << 10

// server is one Serve: its processes, commands and connections.
type server struct {
	opts Options
	log  *slog.Logger

	// procMu is held across fork and wait4 so that the reaper always
	// finds a pid it reaps in procs.
	procMu sync.Mutex
	procs  map[int]*command

	// groups are the process groups the server started.
	groups groupSet

	// mu guards the commands, their output and stdin, and the
	// connections (see command and conn).
	mu      sync.Mutex
	cmds    map[uint32]*command
	conns   map[*conn]struct{}
	closing bool

	quit     chan struct{}
	quitOnce sync.Once
	// wg counts the pipe readers and stdin writers.
	wg sync.WaitGroup
}

// Serve runs the command server until ctx is done, a client sends
// Shutdown, its socket is removed or its owner ends (Options.OwnerPID);
// either way it SIGKILLs every process group it started and
// returns nil. It returns an error when it cannot listen.
func Serve(ctx context.Context, opts Options) error {
	if opts.Socket == "" {
		return errors.New("cmdserver: no socket path")
	}
	opts.complete()
	s := &server{
		opts:   opts,
		log:    opts.Logger,
		procs:  map[int]*command{},
		groups: groupSet{pgids: map[int]struct{}{}},
		cmds:   map[uint32]*command{},
		conns:  map[*conn]struct{}{},
		quit:   make(chan struct{}),
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
	watchStop := make(chan struct{})
	defer close(watchStop)
	go s.watch(watchStop)
	select {
	case <-ctx.Done():
		s.log.Info("command server stopping", slog.String("reason", "context done"))
	case <-s.quit:
		s.log.Info("command server stopping", slog.String("reason", "shutdown requested"))
	}
	ln.Close()
	s.killAll()
	s.closeConns()
	close(reaperStop)
	<-reaperDone
	s.waitPipes()
	s.log.Info("command server stopped")
	return nil
}

// stop ends Serve (a client's Shutdown).
func (s *server) stop() { s.quitOnce.Do(func() { close(s.quit) }) }

// acceptLoop serves each new connection until the listener closes.
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
		cn := newConn(s, nc)
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

// closeConns marks the server closing, closes every connection but those
// that asked for the Shutdown, wakes every waiting pipe reader and stdin
// writer, then gives the Bye up to a second to reach the asking clients.
func (s *server) closeConns() {
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
		c.stdin.cond.Broadcast()
	}
	s.mu.Unlock()
	deadline := time.After(time.Second)
	for _, cn := range flush {
		select {
		case <-cn.sendDone:
		case <-deadline:
		}
		cn.nc.Close()
	}
}

// waitPipes waits up to a second for the pipe readers and stdin writers.
func (s *server) waitPipes() {
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Second):
		s.log.Warn("command server stopped with pipe readers still running")
	}
}
