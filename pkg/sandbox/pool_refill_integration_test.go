//go:build integration

package sandbox

import (
	"context"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A company's refillDelaySec (unset here: its default, 3 s) holds the
// refill that a claim leaves: the claimed member's replacement is created
// no sooner than the delay after the acquire began, whether the daemon
// that syncs the pools claimed it (its take holds the namespace) or
// another daemon of the same owner did (the syncing daemon's informer sees
// the member leave the pool with no deletion begun). An acquire in that
// time finds no member and starts a pod of its own.
func TestPoolRefillDelay(t *testing.T) {
	const delay = 3 * time.Second
	e := newPoolTenantSpec(t, "{warmPool: [{adapterType: claude_local, count: 1}]}")
	a, err := e.poolManager("daemon-a")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	e.pm = a
	e.waitPool(t, "the pool to fill", 1, nil)
	b, err := e.poolManager("daemon-b")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	if h := e.leaseHolder(t); h != "daemon-a" {
		t.Fatalf("the pools' Lease is held by %q, want daemon-a", h)
	}
	var used []string
	for _, tc := range []struct {
		name string
		m    *Manager
	}{{"claimed by the daemon that syncs the pools", a}, {"claimed by another daemon of the owner", b}} {
		members := e.waitPool(t, tc.name+": the pool full", 1, used)
		waitSeesReady(t, tc.m, e.ns)
		began := time.Now()
		warm := e.acquireOn(t, tc.m)
		cold := e.acquireOn(t, tc.m)
		used = append(used, warm, cold)
		if warm != members[0] || slices.Contains(members, cold) {
			t.Errorf("%s: the acquires got %s and %s; want the member %s, then a pod of its own", tc.name, warm, cold, members[0])
		}
		next := e.waitPool(t, tc.name+": the claimed member replaced", 1, used)
		pod, err := e.c.Client().CoreV1().Pods(e.ns).Get(context.Background(), next[0], metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		// creationTimestamp is whole seconds, rounded down.
		if earliest := began.Truncate(time.Second).Add(delay); pod.CreationTimestamp.Before(&metav1.Time{Time: earliest}) {
			t.Errorf("%s: the replacement %s was created at %s, before the refill delay ended (%s; the acquire began at %s)",
				tc.name, pod.Name, pod.CreationTimestamp.UTC().Format(time.RFC3339), earliest.UTC().Format(time.RFC3339), began.UTC().Format(time.RFC3339Nano))
		}
	}
}

// acquireOn acquires a claude_local lease of the env's company through m,
// released when the test ends; it returns the lease's id (its pod's name).
func (e *poolEnv) acquireOn(t *testing.T, m *Manager) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	info, err := m.Acquire(ctx, AcquireParams{Config: EnvironmentConfig{Company: e.slug()}, AdapterType: "claude_local", RunID: "run-1"})
	if err != nil {
		t.Fatalf("acquire: %v\nlogs:\n%s", err, e.logs.String())
	}
	t.Cleanup(func() { _, _ = m.Release(context.Background(), ReleaseParams{ID: info.ID, Cancel: true}) })
	return info.ID
}

// waitSeesReady waits until m's informer has a Ready member in namespace ns.
func waitSeesReady(t *testing.T, m *Manager, ns string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		for _, s := range m.Pools() {
			if s.Namespace == ns && s.Ready > 0 {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the daemon sees no Ready member in %s: %+v", ns, m.Pools())
		}
		time.Sleep(50 * time.Millisecond)
	}
}
