package cmdserver

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// watch stops the server when it can no longer be reached or its owner is
// gone: its socket file removed or replaced (the socket's directory removed
// with it), or the process Options.OwnerPID ended. It checks every
// Options.Watch until stop closes.
func (s *server) watch(stop <-chan struct{}) {
	ino, err := inode(s.opts.Socket)
	if err != nil {
		s.log.Warn("command server cannot watch its socket", slog.Any("error", err))
	}
	var owner string
	if s.opts.OwnerPID > 0 {
		if owner, err = startTime(s.opts.OwnerPID); err != nil {
			s.log.Info("command server stopping", slog.String("reason", "owner gone"), slog.Int("owner", s.opts.OwnerPID))
			s.stop()
			return
		}
	}
	t := time.NewTicker(s.opts.Watch)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		if reason := s.gone(ino, owner); reason != "" {
			s.log.Info("command server stopping", slog.String("reason", reason))
			s.stop()
			return
		}
	}
}

// gone says why the server should stop, or "".
func (s *server) gone(ino uint64, owner string) string {
	if ino != 0 {
		if got, err := inode(s.opts.Socket); err != nil || got != ino {
			return "socket " + s.opts.Socket + " removed or replaced"
		}
	}
	if owner != "" {
		if got, err := startTime(s.opts.OwnerPID); err != nil || got != owner {
			return "owner process " + strconv.Itoa(s.opts.OwnerPID) + " ended"
		}
	}
	return ""
}

// inode is path's inode number (not following a symbolic link).
func inode(path string) (uint64, error) {
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		return 0, fmt.Errorf("cmdserver: stat %s: %w", path, err)
	}
	return st.Ino, nil
}

// startTime is process pid's start time in clock ticks since boot (field 22
// of /proc/PID/stat): a pid reused by another process has another.
func startTime(pid int) (string, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return "", fmt.Errorf("cmdserver: process %d: %w", pid, err)
	}
	// The command name (field 2) is in parentheses and may hold spaces.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return "", fmt.Errorf("cmdserver: process %d: unexpected stat %q", pid, b)
	}
	fields := strings.Fields(string(b[i+1:]))
	if len(fields) < 20 {
		return "", fmt.Errorf("cmdserver: process %d: unexpected stat %q", pid, b)
	}
	if fields[0] == "Z" || fields[0] == "X" {
		return "", fmt.Errorf("cmdserver: process %d: ended (state %s)", pid, fields[0])
	}
	return fields[19], nil
}

// CloseInherited closes the file descriptors above stderr that this process
// inherited from the one that started it, and returns them. A descriptor
// inherited across exec is one without close-on-exec: every one the Go
// runtime and package os open has it. A server that outlives whoever
// started it would otherwise hold their files (and the locks on them) open.
// Call it first thing in a process that runs Serve.
func CloseInherited() ([]int, error) {
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return nil, fmt.Errorf("cmdserver: list inherited files: %w", err)
	}
	var closed []int
	var errs []error
	for _, e := range entries {
		fd, err := strconv.Atoi(e.Name())
		if err != nil || fd <= 2 {
			continue
		}
		flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
		if err != nil || flags&unix.FD_CLOEXEC != 0 {
			continue // the directory's own descriptor, closed by now, or one of ours
		}
		if err := unix.Close(fd); err != nil && !errors.Is(err, syscall.EBADF) {
			errs = append(errs, fmt.Errorf("cmdserver: close inherited fd %d: %w", fd, err))
			continue
		}
		closed = append(closed, fd)
	}
	return closed, errors.Join(errs...)
}
