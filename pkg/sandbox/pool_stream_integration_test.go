//go:build integration

package sandbox

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/pcsync/pcsync/pkg/sandbox/cmdclient"
)

// memberStream waits until m holds an open stream to the member name and
// returns the member's UID and the stream's client.
func (e *poolEnv) memberStream(t *testing.T, m *Manager, name string) (types.UID, *cmdclient.Client) {
	t.Helper()
	pod, err := e.c.Client().CoreV1().Pods(e.ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		m.warm.mu.Lock()
		ws := m.warm.byUID[pod.UID]
		m.warm.mu.Unlock()
		if ws != nil {
			select {
			case <-ws.done:
				if ws.c == nil {
					t.Fatalf("member %s: its stream did not open: %v\nlogs:\n%s", name, ws.err, e.logs.String())
				}
				return pod.UID, ws.c
			default:
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("member %s: no stream opened within a minute of it being Ready\nlogs:\n%s", name, e.logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A Ready warm pool member has its command stream opened before any lease
// claims it, and the lease that claims it takes that stream: its executes
// run on it, with no open of their own (on a real node an open is a
// container exec, 100–300 ms that the first execute would wait for). A
// member deleted before any claim has its stream closed.
func TestPoolMemberStreamOpenedAhead(t *testing.T) {
	e := newPoolEnv(t, 1)
	first := e.waitPool(t, "the pool to fill", 1, nil)
	uid, ahead := e.memberStream(t, e.pm, first[0])

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	info, err := e.pm.Acquire(ctx, AcquireParams{Config: EnvironmentConfig{Company: e.slug()}, AdapterType: "claude_local", RunID: "run-1"})
	if err != nil {
		t.Fatalf("acquire: %v\nlogs:\n%s", err, e.logs.String())
	}
	t.Cleanup(func() { _, _ = e.pm.Release(context.Background(), ReleaseParams{ID: info.ID, Cancel: true}) })
	if info.ID != first[0] {
		t.Fatalf("the lease is pod %s; want the member %s", info.ID, first[0])
	}
	res, err := e.pm.Execute(ctx, ExecParams{LeaseID: info.ID, Command: "sh", Args: []string{"-c", "echo leased"}}, nil)
	if err != nil || res.Stdout != "leased\n" {
		t.Fatalf("execute: %v, stdout %q", err, res.Stdout)
	}
	l := e.pm.lookup(info.ID)
	l.mu.Lock()
	got := l.client
	l.mu.Unlock()
	if got != ahead {
		t.Errorf("the lease's stream is not the one opened to the member before its claim")
	}
	if n := got.Stats().Opens; n != 1 {
		t.Errorf("the lease's stream was opened %d times; want 1 (the member's open)", n)
	}
	e.pm.warm.mu.Lock()
	_, kept := e.pm.warm.byUID[uid]
	e.pm.warm.mu.Unlock()
	if kept {
		t.Errorf("the claimed member's stream is still the pool's")
	}

	// The refill's member: deleted by hand, its stream is closed.
	second := e.waitPool(t, "the claimed member replaced", 1, first)
	_, c := e.memberStream(t, e.pm, second[0])
	if err := e.c.Client().CoreV1().Pods(e.ns).Delete(ctx, second[0], metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for c.Ping(ctx) == nil {
		if time.Now().After(deadline) {
			t.Fatalf("member %s deleted: its stream still answers a minute later", second[0])
		}
		time.Sleep(50 * time.Millisecond)
	}
}
