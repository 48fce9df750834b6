package cmdserver

import (
	"errors"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// groupSet is the process groups the server started, known by their
// leader's pid: what shutdown kills. It has its own lock, taken last.
type groupSet struct {
	mu    sync.Mutex
	pgids map[int]struct{}
}

func (g *groupSet) add(pgid int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.pgids[pgid] = struct{}{}
}

// dropIfGone forgets pgid once no process is left in it, so that a reused
// pid is rarely hit.
func (g *groupSet) dropIfGone(pgid int) {
	if pgid <= 0 || !errors.Is(unix.Kill(-pgid, 0), unix.ESRCH) {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.pgids, pgid)
}

func (g *groupSet) list() []int {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]int, 0, len(g.pgids))
	for pgid := range g.pgids {
		out = append(out, pgid)
	}
	return out
}

// keepOnly forgets every group but those of keep.
func (g *groupSet) keepOnly(keep []int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for pgid := range g.pgids {
		if !slices.Contains(keep, pgid) {
			delete(g.pgids, pgid)
		}
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

// reapAll reaps every child that has exited, without waiting.
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
	for _, o := range c.streams() {
		if o.pipe != nil {
			_ = o.pipe.SetReadDeadline(deadline) // a closed pipe reads no more anyway
		}
	}
	s.log.Debug("command exited", slog.Uint64("id", uint64(c.id)), slog.Int("pid", c.pid), slog.Int("exitCode", c.exit.ExitCode), slog.String("signal", c.exit.Signal))
	s.maybeDone(c)
}

// killAll SIGKILLs every process group the server started and waits up to
// KillWait for them to be gone (reaped). A group whose processes all ended
// before is dropped when its command is forgotten, so a reused pid is
// rarely hit.
func (s *server) killAll() {
	groups := s.groups.list()
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
	s.groups.keepOnly(groups)
}
