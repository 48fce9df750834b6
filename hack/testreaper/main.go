// Command testreaper runs a command (make test's suites) as a child
// subreaper, so that every process the command starts and leaves behind,
// detached or not, becomes its child when its own parent ends. It reaps
// those adopted children as soon as they end, as init would (a test that
// checks with kill(pid, 0) that a process is gone sees no zombie). When the
// command ends it gives those still running a grace period to end by
// themselves, then names each one, kills it, and exits 1.
//
//	go run ./hack/testreaper [-grace 20s] -- COMMAND [ARG...]
//
// It exits with the command's status when that is not 0.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

func main() {
	grace := flag.Duration("grace", 20*time.Second, "how long processes left behind may take to end by themselves")
	flag.Parse()
	if flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: testreaper [-grace D] -- COMMAND [ARG...]")
		os.Exit(2)
	}
	os.Exit(run(flag.Args(), *grace, os.Stderr))
}

// run runs argv as a child subreaper and returns the exit status.
func run(argv []string, grace time.Duration, stderr io.Writer) int {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		fmt.Fprintf(stderr, "testreaper: become a child subreaper: %v\n", err)
		return 2
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(stderr, "testreaper: %v\n", err)
		return 2
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		for s := range sigs {
			_ = cmd.Process.Signal(s)
		}
	}()
	stopReaping := reapAdopted(cmd.Process.Pid)
	status := 0
	err := cmd.Wait()
	stopReaping()
	if err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			fmt.Fprintf(stderr, "testreaper: %v\n", err)
			return 2
		}
		status = max(ee.ExitCode(), 1)
	}
	left := waitChildren(grace)
	if len(left) == 0 {
		return status
	}
	fmt.Fprintf(stderr, "testreaper: %d processes that %s started were still running %s after it ended (killed now):\n",
		len(left), argv[0], grace)
	for _, p := range left {
		fmt.Fprintf(stderr, "  pid %d: %s\n", p.pid, p.cmdline)
		_ = unix.Kill(p.pid, unix.SIGKILL)
	}
	killOrphans(5*time.Second, stderr)
	return max(status, 1)
}

// proc is one process left behind.
type proc struct {
	pid     int
	cmdline string
	zombie  bool // ended, not yet reaped
}

// waitChildren reaps this process's ended children until none is left or
// grace has passed, and returns those still running.
func waitChildren(grace time.Duration) []proc {
	deadline := time.Now().Add(grace)
	for {
		reap()
		left := children()
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
		time.Sleep(200 * time.Millisecond) // polling /proc: no event tells a subreaper its adopted children
	}
}

// killOrphans kills the killed processes' own children, adopted in turn,
// and reaps them, for up to d.
func killOrphans(d time.Duration, stderr io.Writer) {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		reap()
		left := children()
		if len(left) == 0 {
			return
		}
		for _, p := range left {
			fmt.Fprintf(stderr, "  pid %d (orphaned by the kill): %s\n", p.pid, p.cmdline)
			_ = unix.Kill(p.pid, unix.SIGKILL)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// reapAdopted reaps, at each SIGCHLD, the ended children of this process
// but main (whose status cmd.Wait takes), until the returned func is
// called.
func reapAdopted(main int) (stop func()) {
	chld := make(chan os.Signal, 16)
	signal.Notify(chld, syscall.SIGCHLD)
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		for {
			select {
			case <-done:
				return
			case <-chld:
			}
			for _, pid := range zombies(main) {
				var ws unix.WaitStatus
				_, _ = unix.Wait4(pid, &ws, unix.WNOHANG, nil)
			}
		}
	}()
	return func() {
		signal.Stop(chld)
		close(done)
		<-finished
	}
}

// zombies lists this process's ended, unreaped children but skip.
func zombies(skip int) []int {
	var out []int
	for _, p := range kids() {
		if p.zombie && p.pid != skip {
			out = append(out, p.pid)
		}
	}
	return out
}

// reap collects every ended child without waiting.
func reap() {
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}

// children lists the running (not zombie) children of this process.
func children() []proc {
	var out []proc
	for _, p := range kids() {
		if !p.zombie {
			out = append(out, p)
		}
	}
	return out
}

// kids lists every child of this process, from /proc.
func kids() []proc {
	self := os.Getpid()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []proc
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		ppid, state, ok := stat(pid)
		if !ok || ppid != self {
			continue
		}
		b, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		out = append(out, proc{pid: pid, zombie: state == "Z",
			cmdline: strings.TrimSpace(strings.ReplaceAll(string(b), "\x00", " "))})
	}
	return out
}

// stat reads a process's parent and state from /proc/PID/stat.
func stat(pid int) (ppid int, state string, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, "", false
	}
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, "", false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 2 {
		return 0, "", false
	}
	ppid, err = strconv.Atoi(f[1])
	return ppid, f[0], err == nil
}
