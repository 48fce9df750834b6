package localexec

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/pcsync/pcsync/internal/lib/safefile"
	"github.com/pcsync/pcsync/pkg/runs"
)

// ShimArg is the argument that selects the run shim in a binary that
// embeds it: `pcsync daemon run-shim`, or a test binary's TestMain.
const ShimArg = "run-shim"

// exitStatus is <state>/runs/<name>/exit.json: how the agent process
// ended, recorded by the shim so that a daemon which adopted the run (and is
// therefore not the agent's parent) learns it too.
type exitStatus struct {
	// ExitCode is the agent's exit code; nil when a signal ended it.
	ExitCode *int `json:"exitCode"`
	// Signal is the signal that ended the agent ("SIGTERM"), if any.
	Signal string `json:"signal,omitempty"`
	// StartError says why the agent could not be started.
	StartError string `json:"startError,omitempty"`
}

// ShimMain is the body of the run shim, the small supervisor process the
// local executor starts for every run. The shim leads the run's process
// group, starts the agent CLI (args after "--") with its own stdin, stdout,
// stderr, working directory and environment, waits for it, records how it
// ended in the exit file, and exits with the agent's code. It survives a
// daemon restart (its output goes to files, not pipes), which is what lets
// the next daemon adopt the run. It ignores SIGTERM, SIGINT and SIGHUP — the
// agent in the same process group gets them — and dies only with SIGKILL.
//
// args are: --exit-file PATH -- AGENT [ARG...]. ShimMain returns the process
// exit code.
func ShimMain(args []string) int {
	exitFile, argv, err := parseShimArgs(args)
	if err != nil {
		fmt.Fprintf(os.Stderr, "pcsync run shim: %v\n", err)
		return 2
	}
	// Caught (not ignored) so that the agent, after exec, has the default
	// dispositions again.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	go func() {
		for range sigs {
		}
	}()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	if err := cmd.Start(); err != nil {
		msg := fmt.Sprintf("start %s: %v", argv[0], err)
		fmt.Fprintf(os.Stderr, "pcsync run shim: %s\n", msg)
		code := 127
		if werr := writeExitStatus(exitFile, exitStatus{ExitCode: &code, StartError: msg}); werr != nil {
			fmt.Fprintf(os.Stderr, "pcsync run shim: %v\n", werr)
		}
		return code
	}
	_ = cmd.Wait()
	st := statusOf(cmd.ProcessState)
	if err := writeExitStatus(exitFile, st); err != nil {
		fmt.Fprintf(os.Stderr, "pcsync run shim: %v\n", err)
	}
	if st.ExitCode != nil {
		return *st.ExitCode
	}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return 1
}

func parseShimArgs(args []string) (exitFile string, argv []string, err error) {
	for i := 0; i < len(args); i++ {
		switch args[i] {
		case "--exit-file":
			if i+1 >= len(args) {
				return "", nil, errors.New("--exit-file needs a value")
			}
			exitFile = args[i+1]
			i++
		case "--":
			argv = args[i+1:]
			if exitFile == "" || len(argv) == 0 {
				return "", nil, errors.New("usage: run-shim --exit-file PATH -- AGENT [ARG...]")
			}
			return exitFile, argv, nil
		default:
			return "", nil, fmt.Errorf("unknown argument %q", args[i])
		}
	}
	return "", nil, errors.New("usage: run-shim --exit-file PATH -- AGENT [ARG...]")
}

// statusOf turns a process state into an exitStatus.
func statusOf(ps *os.ProcessState) exitStatus {
	if ps == nil {
		return exitStatus{}
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return exitStatus{Signal: signalName(ws.Signal())}
	}
	code := ps.ExitCode()
	return exitStatus{ExitCode: &code}
}

// signalName is "SIGTERM" for syscall.SIGTERM.
func signalName(s syscall.Signal) string {
	if n := unix.SignalName(s); n != "" {
		return n
	}
	return fmt.Sprintf("SIG%d", int(s))
}

// writeExitStatus writes the exit file atomically (temp file, rename), mode
// 0600. It is not fsynced: after a power loss the run is gone either way.
func writeExitStatus(path string, st exitStatus) error {
	data, err := json.Marshal(st)
	if err != nil {
		return fmt.Errorf("exit file %s: encode: %w", path, err)
	}
	return safefile.WriteAtomic(path, data, 0o600, false)
}

// readExitStatus reads the exit file; ok is false when there is none.
func readExitStatus(path string) (st exitStatus, ok bool, err error) {
	ok, err = safefile.ReadJSON(path, runs.MaxStateBytes, &st)
	if err != nil {
		return st, false, fmt.Errorf("exit file: %w", err)
	}
	return st, ok, nil
}
