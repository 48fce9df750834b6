package testcluster

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"time"
)

// component is one running control-plane process. Its stdout and stderr go to
// <workdir>/logs/<name>.log.
type component struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	logFile *os.File
	done    chan struct{} // closed when the process has exited
	waitErr error
}

// spawnReq asks the spawner thread to start a command.
type spawnReq struct {
	cmd  *exec.Cmd
	errc chan error
}

var (
	spawnOnce sync.Once
	spawnCh   chan spawnReq
)

// spawn starts cmd from one dedicated OS thread that never exits. On Linux the
// children get Pdeathsig=SIGKILL, which the kernel delivers when the thread that
// forked them ends; starting them from an ordinary goroutine would kill them whenever
// the Go runtime retires that thread, so one locked thread does all the forking.
func spawn(cmd *exec.Cmd) error {
	spawnOnce.Do(func() {
		spawnCh = make(chan spawnReq)
		go func() {
			runtime.LockOSThread() // never unlocked: the thread lives as long as the process
			for req := range spawnCh {
				req.errc <- req.cmd.Start()
			}
		}()
	})
	errc := make(chan error, 1)
	spawnCh <- spawnReq{cmd: cmd, errc: errc}
	return <-errc
}

// startComponent runs bin with args, in its own process group, killed by the kernel
// if this process dies.
func startComponent(name, bin string, args []string, logDir string, env []string) (*component, error) {
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	logPath := filepath.Join(logDir, name+".log")
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("%s: log file: %w", name, err)
	}
	fmt.Fprintf(f, "=== %s %s %q\n", time.Now().Format(time.RFC3339Nano), bin, args)
	cmd := exec.Command(bin, args...)
	cmd.Stdout = f
	cmd.Stderr = f
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = childSysProcAttr()
	if err := spawn(cmd); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("%s: start %s: %w", name, bin, err)
	}
	c := &component{name: name, cmd: cmd, logPath: logPath, logFile: f, done: make(chan struct{})}
	go func() {
		c.waitErr = cmd.Wait()
		_ = f.Close()
		close(c.done)
	}()
	return c, nil
}

// exited reports whether the process has ended.
func (c *component) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM, waits up to grace, then SIGKILLs the process (and its group).
func (c *component) stop(grace time.Duration) error {
	if c == nil || c.cmd.Process == nil {
		return nil
	}
	if c.exited() {
		return nil
	}
	pid := c.cmd.Process.Pid
	_ = syscall.Kill(pid, syscall.SIGTERM)
	select {
	case <-c.done:
		return nil
	case <-time.After(grace):
	}
	_ = syscall.Kill(-pid, syscall.SIGKILL) // the group, in case it forked
	_ = syscall.Kill(pid, syscall.SIGKILL)
	select {
	case <-c.done:
		return fmt.Errorf("%s (pid %d): killed after %s without exiting on SIGTERM", c.name, pid, grace)
	case <-time.After(10 * time.Second):
		return fmt.Errorf("%s (pid %d): still running after SIGKILL", c.name, pid)
	}
}

// kill SIGKILLs the process (and its group) without a SIGTERM first and waits for it
// to exit.
func (c *component) kill() error {
	if c == nil || c.cmd.Process == nil || c.exited() {
		return nil
	}
	pid := c.cmd.Process.Pid
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	_ = syscall.Kill(pid, syscall.SIGKILL)
	select {
	case <-c.done:
		return nil
	case <-time.After(10 * time.Second):
		return fmt.Errorf("%s (pid %d): still running after SIGKILL", c.name, pid)
	}
}

// failure describes a component that did not become ready, with the tail of its log.
func (c *component) failure(what error) error {
	state := "still running"
	if c.exited() {
		state = fmt.Sprintf("exited: %v", c.waitErr)
	}
	return fmt.Errorf("%s (%s, log %s): %w\n--- last lines of %s ---\n%s", c.name, state, c.logPath, what,
		c.name, tailFile(c.logPath, 40))
}

// tailFile returns the last n lines of a file (at most 64 KiB are read).
func tailFile(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", path, err)
	}
	defer f.Close()
	const max = 64 << 10
	if st, err := f.Stat(); err == nil && st.Size() > max {
		_, _ = f.Seek(st.Size()-max, io.SeekStart)
	}
	data, _ := io.ReadAll(f)
	lines := bytes.Split(bytes.TrimRight(data, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

// stopAll stops components in reverse start order and joins their errors.
func stopAll(cs []*component, grace time.Duration) error {
	var errs []error
	for i := len(cs) - 1; i >= 0; i-- {
		if err := cs[i].stop(grace); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
