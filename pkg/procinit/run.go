package procinit

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// DefaultRecordFile is the container's termination-message file, the
// Kubernetes default of terminationMessagePath.
const DefaultRecordFile = "/dev/termination-log"

// forwarded are the signals Run passes on to the command's process group.
// SIGCHLD is Run's own, SIGURG is the Go runtime's, and stop signals would
// stop Run itself.
var forwarded = []os.Signal{
	syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT,
	syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGWINCH, syscall.SIGALRM,
}

// Options configure Run.
type Options struct {
	// Args is the command and its arguments; Args[0] is looked up in PATH.
	Args []string
	// RecordFile is where the Record is appended when the command ends;
	// "-" writes none. Default DefaultRecordFile. A file that cannot be
	// opened (outside a container) is skipped.
	RecordFile string
	// Stdout receives the Record as the last line of the container's
	// standard output, after everything the command wrote there (one
	// pipe: its bytes come first). Default os.Stdout; nil in Options
	// given to Run means the default.
	Stdout io.Writer
	// Stderr receives Run's own complaints. Default os.Stderr.
	Stderr io.Writer
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// WaitProxy, when set, is the egress proxy (http://host:port) that
	// must accept a connection before the command starts. Default none.
	WaitProxy string
	// WaitTimeout bounds the wait for WaitProxy. Default 3 min.
	WaitTimeout time.Duration
	// ProxyGrace, when WaitProxy is set, makes the wait a short one: the
	// command starts once the proxy answers once, or when ProxyGrace has
	// passed, whichever comes first, and never fails the run. For a proxy
	// that is up: a new pod's egress may be allowed a moment after it
	// starts (a NetworkPolicy enforcer programs its rules from the pod's
	// event). Zero: the full wait of WaitTimeout.
	ProxyGrace time.Duration
}

// DefaultOptions returns the defaults of Options for args.
func DefaultOptions(args []string) Options {
	return Options{Args: args, RecordFile: DefaultRecordFile, Stdout: os.Stdout, Stderr: os.Stderr, Now: time.Now, WaitTimeout: 3 * time.Minute}
}

func (o *Options) complete() {
	d := DefaultOptions(o.Args)
	o.RecordFile = cmp.Or(o.RecordFile, d.RecordFile)
	if o.Stdout == nil {
		o.Stdout = d.Stdout
	}
	if o.Stderr == nil {
		o.Stderr = d.Stderr
	}
	if o.Now == nil {
		o.Now = d.Now
	}
	o.WaitTimeout = cmp.Or(o.WaitTimeout, d.WaitTimeout)
}

// Run starts the command in its own process group with this process's
// standard streams and environment, forwards signals to the group, reaps
// every child until the command itself ends, writes the Record, and returns
// the status to exit with. It returns 127 when the command cannot be found
// and 126 when it cannot be started, as a shell does.
//
// Run reaps with wait4(-1): a program that calls it must not wait for
// children of its own meanwhile.
func Run(opts Options) int {
	opts.complete()
	if len(opts.Args) == 0 {
		fmt.Fprintln(opts.Stderr, "pcsync init: no command given (pcsync init -- CMD [ARG…])")
		return 2
	}
	if os.Getpid() != 1 {
		// Orphans are reparented to the nearest subreaper: this process.
		_ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
	}
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, forwarded...)
	defer signal.Stop(sigs)

	path, err := exec.LookPath(opts.Args[0])
	if err != nil {
		fmt.Fprintf(opts.Stderr, "pcsync init: %s: %v\n", opts.Args[0], err)
		return 127
	}
	if opts.WaitProxy != "" {
		if code := waitProxy(opts, sigs); code != 0 {
			return code
		}
	}
	started := opts.Now()
	proc, err := os.StartProcess(path, opts.Args, &os.ProcAttr{
		Files: []*os.File{os.Stdin, os.Stdout, os.Stderr},
		Sys:   &syscall.SysProcAttr{Setpgid: true},
	})
	if err != nil {
		fmt.Fprintf(opts.Stderr, "pcsync init: %s: %v\n", opts.Args[0], err)
		return 126
	}
	pid := proc.Pid

	ended := make(chan unix.WaitStatus, 1)
	go reap(pid, ended)
	var ws unix.WaitStatus
wait:
	for {
		select {
		case s := <-sigs:
			// The group's id is the command's pid (Setpgid); a group that
			// is gone already has nothing to signal.
			_ = unix.Kill(-pid, s.(syscall.Signal))
		case ws = <-ended:
			break wait
		}
	}
	rec := Record{StartedAt: started, FinishedAt: opts.Now(), ExitCode: exitCode(ws)}
	if ws.Signaled() {
		rec.Signal = unix.SignalName(ws.Signal())
	}
	writeRecord(opts.RecordFile, rec)
	if opts.RecordFile != "-" {
		_, _ = io.WriteString(opts.Stdout, rec.String()+"\n")
	}
	return rec.ExitCode
}

// reap waits for every child, orphans included, and sends the command's
// status once the command itself is reaped.
func reap(pid int, ended chan<- unix.WaitStatus) {
	for {
		var ws unix.WaitStatus
		got, err := unix.Wait4(-1, &ws, 0, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			// ECHILD: nothing left to wait for, which cannot happen
			// before the command is reaped; end rather than spin.
			ended <- ws
			return
		}
		if got == pid && (ws.Exited() || ws.Signaled()) {
			ended <- ws
			return
		}
	}
}

// exitCode is the status a shell gives a command that ended with ws.
func exitCode(ws unix.WaitStatus) int {
	switch {
	case ws.Exited():
		return ws.ExitStatus()
	case ws.Signaled():
		return 128 + int(ws.Signal())
	}
	return 1
}

// writeRecord appends rec to the file on a line of its own.
func writeRecord(path string, rec Record) {
	if path == "-" {
		return
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return
	}
	defer f.Close()
	prefix := ""
	if st, err := f.Stat(); err == nil && st.Size() > 0 {
		prefix = "\n"
	}
	_, _ = io.WriteString(f, prefix+rec.String()+"\n")
}
