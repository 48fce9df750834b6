//go:build integration

package sandbox

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/pcsync/pcsync/internal/lib/leader"
	"github.com/pcsync/pcsync/pkg/sandbox/pool"
)

// cutoff carries one daemon's connections to the API server until crash:
// then every connection it has is closed and every new one refused. To
// the cluster the daemon has died: it renews nothing, releases nothing,
// creates and deletes nothing.
type cutoff struct {
	mu    sync.Mutex
	cut   bool
	conns []net.Conn
}

func (c *cutoff) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cut {
		return nil, errors.New("cut off: this daemon has crashed")
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, network, addr)
	if err == nil {
		c.conns = append(c.conns, conn)
	}
	return conn, err
}

func (c *cutoff) crash() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cut = true
	for _, conn := range c.conns {
		_ = conn.Close()
	}
}

// config is the cluster's REST config through c.
func (c *cutoff) config(e *poolEnv) *rest.Config {
	cfg := e.c.RESTConfig()
	cfg.Dial = c.dial
	return cfg
}

// leaseHolder is the holder the API server has for the owner's pool Lease.
func (e *poolEnv) leaseHolder(t *testing.T) string {
	t.Helper()
	l, err := e.c.Client().CoordinationV1().Leases("default").Get(context.Background(), pool.LeaseName(e.owner), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// checkWholeAndQuiet waits a few syncs and checks that the pool still has
// member alone, and that ch saw one create and no delete in all.
func (e *poolEnv) checkWholeAndQuiet(t *testing.T, ch *churn, what, member string) {
	t.Helper()
	time.Sleep(3 * time.Second) // a few syncs of the new holder
	if got := e.waitPool(t, what, 1, nil); got[0] != member {
		t.Errorf("%s: member %s replaced by %s", what, member, got[0])
	}
	if created, deleted := ch.counts(); created != 1 || deleted != 0 {
		t.Errorf("%s: %d members created, %d deleted; want 1 and 0\nlogs:\n%s", what, created, deleted, e.logs.String())
	}
}

// The holder of the owner's pool Lease crashes (cut off from the API
// server: it releases nothing). The standby takes over once the Lease
// expires, adopts the member, and the pool stays whole (the same member
// Ready) and quiet (one create in all, no delete).
func TestPoolLeaseHolderCrashed(t *testing.T) {
	e := newPoolTenant(t, 1)
	ch := watchChurn(t, e)
	names := []string{"daemon-a", "daemon-b"}
	cut := &cutoff{}
	a, err := e.poolManagerOn(names[0], cut.config(e))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	e.pm = a
	waitLeader(t, e, names[:1], a)
	first := e.waitPool(t, "the pool to fill", 1, nil)
	b, err := e.poolManager(names[1])
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	if got := waitLeader(t, e, names, a, b); got != 0 {
		t.Fatalf("%s acts before the crash; want %s", names[got], names[0])
	}

	cut.crash()
	crashed := time.Now()
	waitLeader(t, e, names[1:], b)
	t.Logf("takeover: %s acts %v after %s crashed", names[1], time.Since(crashed).Round(time.Millisecond), names[0])
	if h := e.leaseHolder(t); h != names[1] {
		t.Errorf("the pool Lease's holder is %q; want %s", h, names[1])
	}
	e.pm = b
	e.checkWholeAndQuiet(t, ch, "the pool kept by the new holder", first[0])
}

// replica is one daemon run with --leader-elect: its sandbox (a Manager of
// the env's owner) runs only while it holds the leader Lease, as
// internal/daemon runs it, beside the owner's pool Lease in the same
// namespace.
type replica struct {
	name string
	cut  *cutoff
	m    atomic.Pointer[Manager]
	stop context.CancelFunc
	done chan error
}

func (e *poolEnv) startReplica(t *testing.T, name string) *replica {
	t.Helper()
	r := &replica{name: name, cut: &cutoff{}, done: make(chan error, 1)}
	cfg := r.cut.config(e)
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	lo := leader.DefaultOptions()
	lo.Namespace, lo.Name, lo.Identity = "default", "pcsync-leader-"+e.slug(), name
	lo.LeaseDuration, lo.RenewDeadline, lo.RetryPeriod = 4*time.Second, 3*time.Second, 500*time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	r.stop = cancel
	go func() {
		r.done <- leader.Run(ctx, cs, lo, func(ctx context.Context) error {
			m, err := e.poolManagerOn(name, cfg)
			if err != nil {
				return err
			}
			r.m.Store(m)
			<-ctx.Done()
			r.m.Store(nil)
			m.Close()
			return nil
		})
	}()
	t.Cleanup(func() {
		cancel()
		<-r.done
	})
	return r
}

// waitLeading waits until one replica of rs runs its sandbox, and its
// pool controller acts and names itself; the others run none.
func waitLeading(t *testing.T, e *poolEnv, rs ...*replica) *replica {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		var running []*replica
		for _, r := range rs {
			if r.m.Load() != nil {
				running = append(running, r)
			}
		}
		if len(running) == 1 {
			if acting, holder := running[0].m.Load().pools.Leadership(); acting && holder == running[0].name {
				return running[0]
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting for one replica to lead and act on the pools: %d run a sandbox\nlogs:\n%s", len(running), e.logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Two replicas of one deployment with --leader-elect: only the leader runs
// the sandbox, and its pool controller holds the owner's pool Lease beside
// the leader Lease. When the leader stops (its Leases released) or
// crashes (both expire), the other leads, its controller takes the pool
// Lease and adopts the member: the pool stays whole and quiet.
func TestPoolLeaseWithLeaderElect(t *testing.T) {
	tests := []struct {
		name  string
		crash bool
	}{
		{"leader stops", false},
		{"leader crashes", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newPoolTenant(t, 1)
			ch := watchChurn(t, e)
			rs := []*replica{e.startReplica(t, "replica-a"), e.startReplica(t, "replica-b")}
			lead := waitLeading(t, e, rs...)
			e.pm = lead.m.Load()
			first := e.waitPool(t, "the pool to fill", 1, nil)
			if h := e.leaseHolder(t); h != lead.name {
				t.Errorf("the pool Lease's holder is %q; want the leader, %s", h, lead.name)
			}

			if tt.crash {
				lead.cut.crash()
			} else {
				lead.stop()
			}
			next := rs[0]
			if next == lead {
				next = rs[1]
			}
			ended := time.Now()
			if got := waitLeading(t, e, next); got != next {
				t.Fatalf("%s leads after %s ended; want %s", got.name, lead.name, next.name)
			}
			t.Logf("%s leads and acts %v after %s ended", next.name, time.Since(ended).Round(time.Millisecond), lead.name)
			if h := e.leaseHolder(t); h != next.name {
				t.Errorf("the pool Lease's holder is %q; want the new leader, %s", h, next.name)
			}
			e.pm = next.m.Load()
			e.checkWholeAndQuiet(t, ch, "the pool kept by the new leader", first[0])
		})
	}
}
