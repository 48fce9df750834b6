package cmdserver

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/pcsync/pcsync/pkg/sandbox/wire"
)

var errNotFound = errors.New("executable file not found in $PATH")

// start handles a Start frame: it registers command id and starts it; a
// command that cannot start ends at once with exit code 127 (not found)
// or 126. It returns an error only for an id already in use.
func (s *server) start(cn *conn, id uint32, p wire.StartPayload) error {
	s.mu.Lock()
	if _, dup := s.cmds[id]; dup {
		s.mu.Unlock()
		return fmt.Errorf("command %d: id already in use", id)
	}
	c := s.newCommand(id, cn)
	c.stdin.on = p.Stdin
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
		c.exited, c.stdout.eof, c.stderr.eof = true, true, true
		c.exit = wire.ExitPayload{ExitCode: code, Error: err.Error()}
		s.maybeDone(c)
		s.mu.Unlock()
		return nil
	}
	log.Debug("command started", slog.Int("pid", c.pid), slog.String("argv0", p.Argv[0]))
	return nil
}

// pipes are a command's standard streams: the child's ends (in, out, err)
// and the server's (stdin, stdout, stderr; stdin nil without Stdin).
type pipes struct {
	in, out, err          *os.File
	stdin, stdout, stderr *os.File
}

// openPipes opens p's stdin (a pipe, or /dev/null) and its output pipes.
func openPipes(p wire.StartPayload) (*pipes, error) {
	var ps pipes
	var err error
	if p.Stdin {
		ps.in, ps.stdin, err = os.Pipe()
	} else {
		ps.in, err = os.Open(os.DevNull)
	}
	if err != nil {
		return nil, fmt.Errorf("start: stdin: %w", err)
	}
	if ps.stdout, ps.out, err = os.Pipe(); err != nil {
		ps.closeChild()
		closeFile(ps.stdin)
		return nil, fmt.Errorf("start: stdout pipe: %w", err)
	}
	if ps.stderr, ps.err, err = os.Pipe(); err != nil {
		ps.closeChild()
		closeFile(ps.stdin)
		closeFile(ps.stdout)
		return nil, fmt.Errorf("start: stderr pipe: %w", err)
	}
	return &ps, nil
}

// closeChild closes the child's ends (after the fork, or when it failed).
func (ps *pipes) closeChild() {
	closeFile(ps.in)
	closeFile(ps.out)
	closeFile(ps.err)
}

// spawn forks and execs p for c in a new process group and starts the
// goroutines that read its output and write its stdin.
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
	path, err := lookPath(p.Argv[0], env, s.opts.Environ)
	if err != nil {
		return fmt.Errorf("start: %w", err)
	}
	if s.opts.Prepare != nil {
		if err := s.opts.Prepare(env); err != nil {
			return fmt.Errorf("start: %w", err)
		}
	}
	ps, err := openPipes(p)
	if err != nil {
		return err
	}
	s.mu.Lock()
	c.stdout.pipe, c.stderr.pipe = ps.stdout, ps.stderr
	s.mu.Unlock()
	attr := &syscall.ProcAttr{
		Dir:   p.Cwd,
		Env:   env,
		Files: []uintptr{ps.in.Fd(), ps.out.Fd(), ps.err.Fd()},
		Sys:   &syscall.SysProcAttr{Setpgid: true},
	}
	err = s.fork(c, path, p, attr)
	ps.closeChild()
	if err != nil {
		closeFile(ps.stdin)
		ps.stdout.Close()
		ps.stderr.Close()
		s.mu.Lock()
		c.stdout.pipe, c.stderr.pipe = nil, nil
		s.mu.Unlock()
		return fmt.Errorf("start %s: %w", path, err)
	}
	s.wg.Add(2)
	go s.readPipe(c, &c.stdout, ps.stdout)
	go s.readPipe(c, &c.stderr, ps.stderr)
	if ps.stdin != nil {
		s.wg.Add(1)
		go s.writeStdin(c, ps.stdin)
	}
	return nil
}

// fork starts the process under procMu, so that the reaper finds its pid
// in procs, and records its group and timeout.
func (s *server) fork(c *command, path string, p wire.StartPayload, attr *syscall.ProcAttr) error {
	s.procMu.Lock()
	defer s.procMu.Unlock()
	pid, err := syscall.ForkExec(path, p.Argv, attr)
	if err != nil {
		return err
	}
	s.procs[pid] = c
	s.mu.Lock()
	c.pid = pid
	s.groups.add(pid)
	if p.TimeoutMs > 0 {
		c.timer = time.AfterFunc(time.Duration(p.TimeoutMs)*time.Millisecond, func() { s.timeout(c) })
	}
	s.mu.Unlock()
	return nil
}

func closeFile(f *os.File) {
	if f != nil {
		f.Close()
	}
}

// buildEnv is the command's environment, sorted: p.Env, over the server's
// own when BaseEnv is set.
func (s *server) buildEnv(p wire.StartPayload) []string {
	m := map[string]string{}
	if p.BaseEnv {
		for _, kv := range s.opts.Environ {
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
	_ = unix.Kill(-c.pid, unix.SIGKILL) // the group may have ended
}
