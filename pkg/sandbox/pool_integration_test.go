//go:build integration

package sandbox

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/pcsync/pcsync/pkg/config"
	"github.com/pcsync/pcsync/pkg/sandbox/pool"
)

// poolEnv is a tenant whose company declares a warm pool of claude_local
// pods, and a Manager of its own owner (the package's other Managers, of
// the default owner, never see its members) that reads the current model;
// the env's own Manager keeps no pools.
type poolEnv struct {
	*env
	owner string
	cur   atomic.Pointer[config.Model]
	pm    *Manager
	// resync is the pool Managers' pool.Options.Resync; default 100ms.
	resync time.Duration
}

func newPoolEnv(t *testing.T, count int) *poolEnv {
	t.Helper()
	e := newPoolTenant(t, count)
	m, err := e.poolManager("daemon-a")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	e.pm = m
	return e
}

// newPoolTenant is a poolEnv with no pool Manager yet.
func newPoolTenant(t *testing.T, count int) *poolEnv {
	t.Helper()
	return newPoolTenantSpec(t, poolSpec(count))
}

// newPoolTenantSpec is newPoolTenant of the company's spec.sandbox spec.
func newPoolTenantSpec(t *testing.T, spec string) *poolEnv {
	t.Helper()
	e := &poolEnv{env: newEnv(t, envOptions{Sandbox: spec, NoPools: true})}
	e.owner = "test-" + e.slug()
	e.cur.Store(e.model)
	if os.Getenv("POOL_TEST_LOGS") != "" {
		t.Cleanup(func() { t.Log(e.logs.String()) })
	}
	return e
}

// poolManager starts a Manager of the env's owner, named identity in the
// owner's pool Lease (short timings), on a state directory of its own;
// the caller closes it.
func (e *poolEnv) poolManager(identity string) (*Manager, error) {
	return e.poolManagerOn(identity, e.c.RESTConfig())
}

// poolManagerOn is poolManager reaching the cluster through cfg.
func (e *poolEnv) poolManagerOn(identity string, cfg *rest.Config) (*Manager, error) {
	o := DefaultOptions(filepath.Join(e.hostDir, "pool-state-"+identity))
	o.HostRoot, o.ServerPath = e.hostDir, pcsyncBin
	o.ReadyTimeout = time.Minute
	o.Pool.Owner, o.Pool.Resync = e.owner, cmp.Or(e.resync, 100*time.Millisecond)
	o.Pool.Lease = testPoolLease(identity)
	o.Logger = slog.New(slog.NewTextHandler(e.logWriter(), &slog.HandlerOptions{Level: slog.LevelDebug})).With("daemon", identity)
	return New(context.Background(), cfg, e.cur.Load, o)
}

func poolSpec(count int) string {
	return "{warmPool: [{adapterType: claude_local, count: " + string(rune('0'+count)) + "}]}"
}

// setCount rewrites the company's pool count and loads the config.
func (e *poolEnv) setCount(t *testing.T, count int) {
	t.Helper()
	f := filepath.Join(e.dir, "company.yaml")
	b, err := os.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	i := strings.Index(string(b), "\n  sandbox: ")
	text := string(b[:i]) + sandboxSpec(poolSpec(count)) + "\n"
	if err := os.WriteFile(f, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := config.Load(context.Background(), e.dir, config.DefaultLoadOptions())
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	e.cur.Store(m)
}

// members are the pool's members as the API server has them (none being
// deleted), by name.
func (e *poolEnv) members(t *testing.T) []string {
	t.Helper()
	l, err := e.c.Client().CoreV1().Pods(e.ns).List(context.Background(), metav1.ListOptions{LabelSelector: pool.LabelOwner + "=" + e.owner})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range l.Items {
		if p.DeletionTimestamp == nil {
			out = append(out, p.Name)
		}
	}
	slices.Sort(out)
	return out
}

// waitPool waits until the pool has members Ready members, none of them
// in not, and as many on the API server; it returns their names.
func (e *poolEnv) waitPool(t *testing.T, what string, members int, not []string) []string {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		ready, have := 0, 0
		for _, s := range e.pm.Pools() {
			if s.Namespace == e.ns {
				ready, have = ready+s.Ready, have+s.Members
			}
		}
		names := e.members(t)
		if ready == members && have == members && testing.Verbose() && os.Getenv("POOL_TEST_LOGS") != "" {
			t.Logf("%s: %v", what, names)
		}
		if ready == members && have == members && len(names) == members && !slices.ContainsFunc(names, func(n string) bool { return slices.Contains(not, n) }) {
			return names
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: the pools are %+v, the members %v (none of %v wanted)\nlogs:\n%s", what, e.pm.Pools(), names, not, e.logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// The warm pool's controller on the real API server (kwok's pods): the
// pool fills; three acquires at once get three different pods, two of
// them the pool's members; the claimed members are replaced by new ones;
// a member deleted by hand is replaced; a smaller count deletes the
// surplus and no more.
func TestPoolController(t *testing.T) {
	e := newPoolEnv(t, 2)
	first := e.waitPool(t, "the pool to fill", 2, nil)

	ids := make([]string, 3)
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for i := range ids {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			info, err := e.pm.Acquire(ctx, AcquireParams{Config: EnvironmentConfig{Company: e.slug()}, AdapterType: "claude_local", RunID: "run-1"})
			ids[i], errs[i] = info.ID, err
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("acquires: %v\nlogs:\n%s", err, e.logs.String())
	}
	t.Cleanup(func() {
		for _, id := range ids {
			_, _ = e.pm.Release(context.Background(), ReleaseParams{ID: id, Cancel: true})
		}
	})
	warm := 0
	for _, id := range ids {
		if slices.Contains(first, id) {
			warm++
		}
	}
	if distinct := len(slices.Compact(slices.Sorted(slices.Values(ids)))); distinct != 3 || warm != 2 {
		t.Errorf("3 acquires got %d distinct pods, %d of them pool members; want 3 and 2 (leases %v, members %v)", distinct, warm, ids, first)
	}
	for _, id := range ids {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		res, err := e.pm.Execute(ctx, ExecParams{LeaseID: id, Command: "sh", Args: []string{"-c", "echo leased"}}, nil)
		cancel()
		if err != nil || res.Stdout != "leased\n" {
			t.Errorf("execute on lease %s: %v, stdout %q", id, err, res.Stdout)
		}
	}

	second := e.waitPool(t, "the claimed members replaced", 2, append(slices.Clone(first), ids...))

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := e.c.Client().CoreV1().Pods(e.ns).Delete(ctx, second[0], metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	third := e.waitPool(t, "the deleted member replaced", 2, second[:1])
	if !slices.Contains(third, second[1]) {
		t.Errorf("members after a delete %v: the one left, %s, was replaced too", third, second[1])
	}

	e.setCount(t, 1)
	fourth := e.waitPool(t, "the surplus deleted", 1, nil)
	time.Sleep(time.Second) // a few config looks and syncs: nothing more may go or come
	if got := e.waitPool(t, "the pool of 1 kept", 1, nil); !slices.Equal(got, fourth) || !slices.Contains(third, fourth[0]) {
		t.Errorf("after the count went to 1: members %v then %v; want one of %v, kept", fourth, got, third)
	}
}

// A changed pool count reaches the controller when it is pushed
// (Manager.ConfigChanged, which the daemon calls on each config it loads),
// not at the next Resync: with Resync an hour (no poll comes during the
// test; the controller reads the config nowhere else), a pushed count of 2
// grows the pool, and a pushed count of 1 shrinks it again.
func TestPoolConfigPushed(t *testing.T) {
	e := newPoolTenant(t, 1)
	e.resync = time.Hour
	m, err := e.poolManager("daemon-a")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	e.pm = m
	first := e.waitPool(t, "the pool to fill", 1, nil)

	e.setCount(t, 2)
	m.ConfigChanged()
	if got := e.waitPool(t, "the pool of 2 once pushed", 2, nil); !slices.Contains(got, first[0]) {
		t.Errorf("members %v after the push of 2; want %s among them", got, first[0])
	}
	e.setCount(t, 1)
	m.ConfigChanged()
	e.waitPool(t, "the pool of 1 once pushed", 1, nil)
}
