//go:build integration

package sandbox

import (
	"context"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pcsync/pcsync/pkg/sandbox/leasepod"
)

// TestPrestart: on the real API server (kwok pods whose executes run on
// this host), a lease begun for a run before its acquire is the lease the
// run's acquire gets; a second prestart of the run, or one after its
// acquire, begins nothing; an acquire with other params gets a lease of its
// own and the prestarted one is deleted; so is one whose run is cancelled,
// one no acquire takes within Options.PrestartWait, and one a restarted
// daemon finds in its journal untaken.
func TestPrestart(t *testing.T) {
	e := newEnv(t, envOptions{PrestartWait: 20 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	params := func(run string) AcquireParams {
		return AcquireParams{Config: EnvironmentConfig{Company: e.slug()}, CompanyID: "company-" + e.slug(),
			EnvironmentID: "env-1", RunID: run, AgentID: "agent-1", AdapterType: "claude_local"}
	}
	prestart := func(run string, p AcquireParams) LeaseInfo {
		t.Helper()
		if ok, why := e.m.Prestart(p); !ok {
			t.Fatalf("prestart of %s: declined: %s", run, why)
		}
		e.m.early.mu.Lock()
		el := e.m.early.byRun[run]
		e.m.early.mu.Unlock()
		<-el.done
		if el.err != nil {
			t.Fatalf("prestart of %s: %v\nlogs:\n%s", run, el.err, e.logs.String())
		}
		return el.info
	}
	gone := func(id, what string) {
		t.Helper()
		if err := e.m.waitGone(ctx, e.ns, id); err != nil {
			t.Errorf("%s: pod %s: %v", what, id, err)
		}
	}

	// The acquire comes while the prestarted pod starts, and waits for it.
	if ok, why := e.m.Prestart(params("run-1")); !ok {
		t.Fatalf("prestart of run-1: declined: %s", why)
	}
	got, err := e.m.Acquire(ctx, params("run-1"))
	if err != nil {
		t.Fatal(err)
	}
	pods, err := e.c.Client().CoreV1().Pods(e.ns).List(ctx, metav1.ListOptions{LabelSelector: leasepod.LabelLease})
	if err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != 1 || pods.Items[0].Name != got.ID {
		var names []string
		for _, p := range pods.Items {
			names = append(names, p.Name)
		}
		t.Errorf("lease pods %v, want only %s, the one begun for run-1 and taken by its acquire", names, got.ID)
	}
	if res := e.exec(t, got.ID, ExecParams{Command: "echo", Args: []string{"taken"}}); res.Stdout != "taken\n" {
		t.Errorf("the taken lease runs commands: stdout %q", res.Stdout)
	}
	if ok, _ := e.m.Prestart(params("run-1")); ok {
		t.Error("a prestart of run-1 after its acquire began a lease")
	}
	// The agent holds a lease of an environment that reuses leases:
	// Paperclip resumes it rather than acquire one.
	reuse := params("run-7")
	reuse.Config.Core = map[string]any{"reuseLease": true}
	if ok, why := e.m.Prestart(reuse); ok {
		t.Error("a prestart for an agent that holds a reusable lease of its environment began a lease")
	} else {
		t.Logf("declined as it should be: %s", why)
	}
	if _, err := e.m.Release(ctx, ReleaseParams{ID: got.ID}); err != nil {
		t.Fatal(err)
	}

	// Another config: the acquire's own lease, the early one deleted.
	early := prestart("run-2", params("run-2"))
	other := params("run-2")
	other.Config.EnvAllow = []string{"GITHUB_TOKEN"}
	got, err = e.m.Acquire(ctx, other)
	if err != nil {
		t.Fatal(err)
	}
	if got.ID == early.ID {
		t.Error("an acquire with another config took the lease begun with the old one")
	}
	gone(early.ID, "a prestarted lease of other params")
	if _, err := e.m.Release(ctx, ReleaseParams{ID: got.ID}); err != nil {
		t.Fatal(err)
	}

	// A cancelled run's, and one no acquire takes.
	early = prestart("run-3", params("run-3"))
	if _, err := e.m.CancelRun(ctx, "run-3"); err != nil {
		t.Fatal(err)
	}
	gone(early.ID, "a cancelled run's prestarted lease")
	unclaimed := prestart("run-4", params("run-4"))
	gone(unclaimed.ID, "a prestarted lease no acquire took")

	// A restarted daemon deletes the pod of one it finds untaken.
	early = prestart("run-5", params("run-5"))
	e.m.Close()
	e.start()
	gone(early.ID, "a prestarted lease untaken at a restart")
	if _, err := e.c.Client().CoreV1().Pods(e.ns).Get(ctx, early.ID, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("pod %s: %v, want it gone", early.ID, err)
	}
	if ok, why := e.m.Prestart(AcquireParams{Config: EnvironmentConfig{Company: e.slug(), NoPrestart: true}, RunID: "run-6"}); ok || why == "" {
		t.Errorf("prestart: false: began %v (%q), want none and why", ok, why)
	}
}
