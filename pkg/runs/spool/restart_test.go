package spool

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/pcsync/pcsync/pkg/result"
	"github.com/pcsync/pcsync/pkg/runs"
	"github.com/pcsync/pcsync/pkg/runs/localexec"
)

// runState reads the local executor's state of a run.
func (h *harness) runState(name string) localexec.RunState {
	h.t.Helper()
	st, ok, err := localexec.ReadRunState(runs.Layout{Dir: h.state}.RunState(name))
	if err != nil || !ok {
		h.t.Fatalf("run state of %s: ok=%v err=%v", name, ok, err)
	}
	return st
}

// TestRestartAdoptsLiveRun: a daemon process is killed (SIGKILL) while a
// run is going; the next daemon adopts the run instead of starting it
// again, and reports it when it ends.
func TestRestartAdoptsLiveRun(t *testing.T) {
	h := newHarness(t, "")
	first := exec.Command(os.Args[0], "test-daemon", filepath.Join(h.dir, "config"), h.spool)
	first.Env = h.environ
	first.Stderr = os.Stderr
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	h.drop("adoptee.yaml", request("slow", ""))
	h.started("adoptee", 1)
	h.waitFor("the run recorded as running", func() bool {
		st, ok, _ := localexec.ReadRunState(runs.Layout{Dir: h.state}.RunState("adoptee"))
		return ok && st.Phase == localexec.PhaseRunning
	})
	if err := first.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = first.Wait()

	h.start()
	h.waitFor("adoption", func() bool { return h.sawEvent(EventAdopted, "adoptee") })
	h.releaseRun("adoptee")
	got := h.result("adoptee")
	if got.Status != result.StatusSucceeded || deref(got.ExitCode) != 0 || got.Summary == nil {
		t.Errorf("status %s exitCode %v summary %v, want succeeded 0 and a summary", got.Status, deref(got.ExitCode), deref(got.Summary))
	}
	if n := h.starts("adoptee"); n != 1 {
		t.Errorf("the agent started %d times, want 1", n)
	}
	log, _ := os.ReadFile(filepath.Join(h.spool, "adoptee.log"))
	if n := strings.Count(string(log), `"subtype":"init"`); n != 1 {
		t.Errorf("the log holds the init line %d times, want once:\n%s", n, log)
	}
}

// TestRestartFindsRunEndedUnseen: the run ended while no daemon ran; the
// shim recorded its exit, so the next daemon reports its real outcome.
func TestRestartFindsRunEndedUnseen(t *testing.T) {
	h := newHarness(t, "")
	h.start()
	h.drop("unseen.yaml", request("slow", ""))
	h.started("unseen", 1)
	h.stop()
	h.releaseRun("unseen")
	h.waitFor("the shim's exit file", func() bool {
		_, err := os.Stat(filepath.Join(h.state, "runs", "unseen", "exit.json"))
		return err == nil
	})
	h.start()
	got := h.result("unseen")
	if got.Status != result.StatusSucceeded || got.Summary == nil {
		t.Errorf("status %s summary %v, want succeeded with the agent's summary", got.Status, deref(got.Summary))
	}
	if n := h.starts("unseen"); n != 1 {
		t.Errorf("the agent started %d times, want 1", n)
	}
}

// TestRestartWithDeadProcess: the run's processes were killed while no
// daemon ran and left no exit status: the next daemon does not start the
// run again, it reports it failed (internal) and says why.
func TestRestartWithDeadProcess(t *testing.T) {
	h := newHarness(t, "")
	h.start()
	h.drop("victim.yaml", request("slow", ""))
	h.started("victim", 1)
	h.stop()
	st := h.runState("victim")
	if err := syscall.Kill(-st.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	h.waitFor("the run's process to be gone", func() bool {
		// Reaped by the stopped daemon's executor, which started it.
		return syscall.Kill(st.PID, 0) == syscall.ESRCH
	})
	h.start()
	got := h.result("victim")
	msg, _ := deref(got.ErrorMessage).(string)
	if got.Status != result.StatusFailed || deref(got.ErrorCode) != result.ErrInternal || !strings.Contains(msg, "is gone and left no exit status; it is not started again") {
		t.Errorf("status %s errorCode %v message %q, want failed internal saying the process is gone", got.Status, deref(got.ErrorCode), msg)
	}
	if n := h.starts("victim"); n != 1 {
		t.Errorf("the agent started %d times, want 1", n)
	}
}

// TestRestartWhileStarting: a daemon that stopped between recording a run
// and spawning it leaves phase "starting"; the run is failed, never started.
func TestRestartWhileStarting(t *testing.T) {
	h := newHarness(t, "")
	h.drop("limbo.yaml", request("coder", ""))
	if err := os.MkdirAll(filepath.Join(h.state, "runs", "limbo"), 0o700); err != nil {
		t.Fatal(err)
	}
	st, _ := json.Marshal(localexec.RunState{Phase: localexec.PhaseStarting, RunID: "limbo"})
	if err := os.WriteFile(runs.Layout{Dir: h.state}.RunState("limbo"), st, 0o600); err != nil {
		t.Fatal(err)
	}
	h.once()
	got := h.result("limbo")
	msg, _ := deref(got.ErrorMessage).(string)
	if got.Status != result.StatusFailed || deref(got.ErrorCode) != result.ErrInternal || !strings.Contains(msg, "may or may not have started") {
		t.Errorf("status %s errorCode %v message %q", got.Status, deref(got.ErrorCode), msg)
	}
	if n := h.starts("limbo"); n != 0 {
		t.Errorf("started %d times, want 0", n)
	}
}

// TestOneDaemonPerSpool: a second daemon on the same spool refuses to run.
func TestOneDaemonPerSpool(t *testing.T) {
	h := newHarness(t, "")
	h.start()
	h.drop("x.yaml", request("coder", ""))
	h.result("x") // the first daemon is up
	d, err := New(h.model, h.executor(), h.options(true))
	if err != nil {
		t.Fatal(err)
	}
	err = d.Run(t.Context())
	if err == nil || !strings.Contains(err.Error(), "another daemon serves this spool") {
		t.Errorf("second daemon: %v, want a lock error", err)
	}
}
