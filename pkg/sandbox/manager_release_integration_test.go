//go:build integration

package sandbox

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/pcsync/pcsync/internal/testing/testcluster"
)

// TestConcurrentReleasesDrain: two releases without cancel of one lease
// whose command still runs both wait for that command, then both get the
// receipt once the pod is gone; neither waits for the lease's expiry.
func TestConcurrentReleasesDrain(t *testing.T) {
	e := newEnv(t, envOptions{})
	info := e.acquire(t, EnvironmentConfig{LeaseTTLSec: 3600})
	ran := make(chan ExecResult, 1)
	go func() {
		ran <- e.exec(t, info.ID, ExecParams{Command: "sh", Args: []string{"-c", "sleep 2; echo drained"}})
	}()
	time.Sleep(300 * time.Millisecond) // the command runs

	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	type answer struct {
		State ReceiptState
		Err   string
	}
	got := make([]answer, 2)
	var wg sync.WaitGroup
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			state, err := e.m.Release(ctx, ReleaseParams{ID: info.ID})
			got[i] = answer{State: state}
			if err != nil {
				got[i].Err = err.Error()
			}
		}()
		time.Sleep(100 * time.Millisecond) // the second comes while the first waits
	}
	wg.Wait()
	want := []answer{{State: ReceiptDestroyed}, {State: ReceiptDestroyed}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("two releases (-want +got):\n%s\nlogs:\n%s", diff, e.logs.String())
	}
	if r := <-ran; r.Stdout != "drained\n" {
		t.Errorf("the command in flight: stdout %q stderr %q, want it to finish before the pod went", r.Stdout, r.Stderr)
	}
}

// TestReleaseStopsHostServer: where pods share the host (HostRoot, kwok),
// a released lease's command server, which outlives its pod, is stopped
// with its commands; nothing of the lease runs on.
func TestReleaseStopsHostServer(t *testing.T) {
	e := newEnv(t, envOptions{})
	info := e.acquire(t, EnvironmentConfig{LeaseTTLSec: 3600})
	e.exec(t, info.ID, ExecParams{Command: "sh", Args: []string{"-c", "(sleep 600 &) ; echo started"}})
	dir := filepath.Join(e.hostDir, info.ID)
	if pids, err := testcluster.HostProcesses(dir); err != nil || len(pids) == 0 {
		t.Fatalf("the control: no process of lease %s under %s (%v)", info.ID, dir, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	if _, err := e.m.Release(ctx, ReleaseParams{ID: info.ID}); err != nil {
		t.Fatal(err)
	}
	var pids []int
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if pids, _ = testcluster.HostProcesses(dir); len(pids) == 0 {
			return
		}
	}
	t.Errorf("processes of the released lease %s still run: %v\nlogs:\n%s", info.ID, pids, e.logs.String())
}
