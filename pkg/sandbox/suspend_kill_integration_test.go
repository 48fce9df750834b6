//go:build integration

package sandbox

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/pcsync/pcsync/pkg/config"
	"github.com/pcsync/pcsync/pkg/sandbox/leasepod"
)

// killChildEnv, set in a re-run of this test binary, makes it a daemon
// (killChild) to be killed at a step of a suspend or a resume.
const killChildEnv = "PCSYNC_SANDBOX_KILL_CHILD"

// killChildArgs is what the daemon to kill is told, as JSON in
// killChildEnv.
type killChildArgs struct {
	Kubeconfig, ConfigDir, HostDir, ServerPath string
	// Lease is the lease to suspend (Action "suspend": made idle) or
	// resume (Action "resume": an execute on it).
	Lease, Action string
	// Step is the step (Options.testHook) at which the daemon says so on
	// its stdout and waits for its SIGKILL.
	Step string
}

// killChild runs a Manager on the state of a.HostDir, as env.start does,
// drives a.Action on a.Lease, and writes each step it reaches to stdout,
// stopping at a.Step for good. It returns only on an error.
func killChild(a killChildArgs) error {
	ctx := context.Background()
	rc, err := clientcmd.BuildConfigFromFlags("", a.Kubeconfig)
	if err != nil {
		return err
	}
	model, err := config.Load(ctx, a.ConfigDir, config.DefaultLoadOptions())
	if err != nil {
		return err
	}
	o := DefaultOptions(filepath.Join(a.HostDir, "state"))
	o.HostRoot, o.ServerPath, o.ReadyTimeout = a.HostDir, a.ServerPath, time.Minute
	o.Pool.Disabled, o.Pool.Lease, o.SuspendCheck = true, testPoolLease(""), 100*time.Millisecond
	o.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	o.testHook = func(step string) {
		fmt.Println(step)
		if step == a.Step {
			select {} // killed here
		}
	}
	m, err := New(ctx, rc, func() *config.Model { return model }, o)
	if err != nil {
		return err
	}
	l := m.lookup(a.Lease)
	if l == nil {
		return fmt.Errorf("lease %s not adopted", a.Lease)
	}
	switch a.Action {
	case "suspend":
		l.mu.Lock()
		l.lastUsed = time.Now().Add(-time.Hour)
		l.mu.Unlock()
	case "resume":
		if _, err := m.Execute(ctx, ExecParams{LeaseID: a.Lease, Command: "true"}, nil); err != nil {
			return err
		}
	}
	time.Sleep(time.Minute)
	return fmt.Errorf("step %s not reached in a minute", a.Step)
}

// killAt runs a daemon (this test binary again, killChild) on the env's
// state directory and cluster that does action on lease id, and kills it
// with SIGKILL once it has reached step.
func (e *env) killAt(t *testing.T, id, action, step string) {
	t.Helper()
	args, err := json.Marshal(killChildArgs{Kubeconfig: e.c.KubeconfigPath(), ConfigDir: e.dir, HostDir: e.hostDir,
		ServerPath: pcsyncBin, Lease: id, Action: action, Step: step})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), killChildEnv+"="+string(args))
	logs := e.logWriter()
	cmd.Stderr = logs
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	reached := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if sc.Text() == step {
				reached <- true
				return
			}
		}
		reached <- false
	}()
	ok := false
	select {
	case ok = <-reached:
	case <-time.After(90 * time.Second):
	}
	if err := syscall.Kill(cmd.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	werr := cmd.Wait()
	var xerr *exec.ExitError
	if !ok || !errors.As(werr, &xerr) || xerr.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("daemon: step %s reached %v, ended %v\nlogs:\n%s", step, ok, werr, e.logs.String())
	}
}

// TestKeptLeaseDaemonKilled: a daemon process killed with SIGKILL at each
// step of a suspend and of a resume leaves a lease that the next daemon,
// on the same state directory and cluster, takes over ready on one pod or
// suspended on none, its claim kept; its next execute runs on one pod
// mounting the claim, with the workspace and HOME files written before the
// suspend, and the journal names that pod.
func TestKeptLeaseDaemonKilled(t *testing.T) {
	// After the kill, the lease is ready on the pod it has (the suspend's
	// delete not sent; the resume's pod made) or suspended on none.
	for _, tc := range []struct {
		step string
		want LeaseState
	}{
		{stepSuspendJournaled, LeaseReady},
		{stepSuspendDeleted, LeaseSuspended},
		{stepSuspended, LeaseSuspended},
		{stepResumeBegun, LeaseSuspended},
		{stepResumeCreated, LeaseReady},
		{stepResumeStarted, LeaseReady},
	} {
		t.Run(tc.step, func(t *testing.T) {
			e := keptEnv(t, testClass)
			info := e.acquire(t, EnvironmentConfig{LeaseTTLSec: 3600, Core: keptCore})
			mark := ExecParams{Command: "sh", Args: []string{"-c", `echo kept > marker && echo home > "$HOME/.marker"`}}
			if r := e.exec(t, info.ID, mark); code(r) != 0 {
				t.Fatalf("write the markers: %+v", r)
			}
			action := "suspend"
			if strings.HasPrefix(tc.step, "resume") {
				action = "resume"
				e.idleNow(t, info.ID)
				e.waitState(t, info.ID, LeaseSuspended)
			}
			e.m.Close()
			e.killAt(t, info.ID, action, tc.step)
			e.start()
			e.waitState(t, info.ID, tc.want)
			e.checkAfterKill(t, info.ID, tc.want)
		})
	}
}

// checkAfterKill checks lease id, in state was after the restart: pods
// (none suspended, one ready), its claim, then an execute that reads the
// markers, one pod on the claim after it, and the journal naming that pod.
func (e *env) checkAfterKill(t *testing.T, id string, was LeaseState) {
	t.Helper()
	wantPods := map[LeaseState]int{LeaseReady: 1, LeaseSuspended: 0}[was]
	if pods := e.leasePods(t, id); len(pods) != wantPods {
		t.Errorf("lease %s %s after the restart: %d pods, want %d", id, was, len(pods), wantPods)
	}
	if pvc := e.claim(t, id); pvc == nil || pvc.DeletionTimestamp != nil {
		t.Fatalf("lease %s lost its claim", id)
	}
	read := ExecParams{Command: "sh", Args: []string{"-c", `cat marker "$HOME/.marker"`}}
	if r := e.exec(t, id, read); r.Stdout != "kept\nhome\n" {
		t.Fatalf("execute after the restart: %q %q\nlogs:\n%s", r.Stdout, r.Stderr, e.logs.String())
	}
	pods := e.leasePods(t, id)
	if len(pods) != 1 || !mountsClaim(&pods[0], id) {
		t.Fatalf("lease %s: %d pods, want 1 on its claim: %v", id, len(pods), podVolumes(pods))
	}
	e.m.Close()
	if r := journalRecord(t, e, id); r.Suspended || r.PodUID != string(pods[0].UID) {
		t.Errorf("journal: lease %s suspended %v on pod %q, want ready on %s", id, r.Suspended, r.PodUID, pods[0].UID)
	}
}

// TestKeptLeaseTenantDeleted: a suspended lease's tenant namespace deleted
// (what a prune of its company does: pkg/apply's
// TestPruneTenantWithKeptLeaseClaim) takes its claim with it, and the
// daemon's sweep ends the lease: no claim, no pod, no journal record. A
// suspended lease of a tenant that stays is kept (the control).
func TestKeptLeaseTenantDeleted(t *testing.T) {
	e := keptEnv(t, testClass)
	e.tune = func(o *Options) { o.SuspendCheck, o.ClaimSweep = 100*time.Millisecond, 200*time.Millisecond }
	stays := keptEnv(t, testClass)
	stays.tune = e.tune
	for _, x := range []*env{e, stays} {
		x.m.Close()
		x.start()
	}
	info := e.acquire(t, EnvironmentConfig{LeaseTTLSec: 3600, Core: keptCore})
	control := stays.acquire(t, EnvironmentConfig{LeaseTTLSec: 3600, Core: keptCore})
	e.idleNow(t, info.ID)
	stays.idleNow(t, control.ID)
	e.waitState(t, info.ID, LeaseSuspended)
	stays.waitState(t, control.ID, LeaseSuspended)
	ctx := context.Background()
	if err := e.c.Client().CoreV1().Namespaces().Delete(ctx, e.ns, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); e.claim(t, info.ID) != nil; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the deleted tenant's claim is still there")
		}
	}
	e.waitGoneLease(t, info.ID)
	if pods := e.leasePods(t, info.ID); len(pods) != 0 {
		t.Errorf("the ended lease has %d pods", len(pods))
	}
	e.m.Close()
	if r, ok := journalLease(t, e, info.ID); ok {
		t.Errorf("the journal still holds the ended lease: %+v", r)
	}
	time.Sleep(time.Second) // a few sweeps
	if s := stays.m.lookup(control.ID); s == nil || s.State() != LeaseSuspended || stays.claim(t, control.ID) == nil {
		t.Errorf("the control: the suspended lease of the tenant that stays was ended")
	}
}

// journalLease is lease id's record in the env's journal, if there.
func journalLease(t *testing.T, e *env, id string) (leasepod.Record, bool) {
	t.Helper()
	j, err := openJournal(filepath.Join(e.hostDir, "state"))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range j.leases() {
		if r.ID == id {
			return r, true
		}
	}
	return leasepod.Record{}, false
}
