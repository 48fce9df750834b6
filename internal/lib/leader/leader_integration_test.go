//go:build integration

package leader

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/pcsync/pcsync/internal/testing/testcluster"
)

// Every test binary of this package runs one real control plane.
func TestMain(m *testing.M) { os.Exit(testcluster.Main(m)) }

// waitDeadline bounds waits; nothing asserts on timing.
const waitDeadline = 2 * time.Minute

// candidate is one replica: Run in the background, recording when it leads.
type candidate struct {
	name    string
	cancel  context.CancelFunc
	done    chan error
	once    sync.Once
	err     error
	leading chan time.Time // when work started
	stopped chan time.Time // when work stopped
}

// shared counts replicas whose work runs, to catch two at once.
type shared struct {
	mu      sync.Mutex
	active  int
	overlap bool
	order   []string
}

func (s *shared) enter(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.active++
	if s.active > 1 {
		s.overlap = true
	}
	s.order = append(s.order, name)
}

func (s *shared) leave() {
	s.mu.Lock()
	s.active--
	s.mu.Unlock()
}

func fastOptions(ns, identity string) Options {
	o := DefaultOptions()
	o.Namespace, o.Name, o.Identity = ns, "pcsync", identity
	o.LeaseDuration, o.RenewDeadline, o.RetryPeriod = 4*time.Second, 3*time.Second, 250*time.Millisecond
	o.Logger = slog.New(slog.DiscardHandler)
	if testing.Verbose() {
		o.Logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	return o
}

func start(t *testing.T, cs kubernetes.Interface, o Options, s *shared) *candidate {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	c := &candidate{name: o.Identity, cancel: cancel, done: make(chan error, 1),
		leading: make(chan time.Time, 1), stopped: make(chan time.Time, 1)}
	go func() {
		c.done <- Run(ctx, cs, o, func(ctx context.Context) error {
			s.enter(c.name)
			c.leading <- time.Now()
			<-ctx.Done()
			// Work that takes a moment to stop: the Lease must not be
			// released before it has.
			time.Sleep(300 * time.Millisecond)
			s.leave()
			c.stopped <- time.Now()
			return nil
		})
	}()
	t.Cleanup(func() { cancel(); c.wait() })
	return c
}

// wait returns Run's result once it has returned.
func (c *candidate) wait() error {
	c.once.Do(func() { c.err = <-c.done })
	return c.err
}

func waitTime(t *testing.T, ch <-chan time.Time, what string) time.Time {
	t.Helper()
	select {
	case at := <-ch:
		return at
	case <-time.After(waitDeadline):
		t.Fatalf("gave up waiting: %s", what)
		return time.Time{}
	}
}

func expectNothing(t *testing.T, ch <-chan time.Time, what string) {
	t.Helper()
	select {
	case <-ch:
		t.Fatalf("%s", what)
	case <-time.After(time.Second):
	}
}

func TestStandbyTakesOverAfterGracefulStop(t *testing.T) {
	c := testcluster.Get(t)
	ns := c.Namespace(t, "leader", nil)
	s := &shared{}
	a := start(t, c.Client(), fastOptions(ns, "a"), s)
	waitTime(t, a.leading, "a leads")
	b := start(t, c.Client(), fastOptions(ns, "b"), s)
	expectNothing(t, b.leading, "b leads while a holds the lease")

	a.cancel()
	stoppedAt := waitTime(t, a.stopped, "a stops")
	if err := a.wait(); err != nil {
		t.Errorf("a: Run = %v, want nil after its context ended", err)
	}
	tookOver := waitTime(t, b.leading, "b takes over")
	t.Logf("takeover after a graceful stop: %v (retry period %v, lease duration %v)",
		tookOver.Sub(stoppedAt).Round(time.Millisecond), 250*time.Millisecond, 4*time.Second)
	if tookOver.Before(stoppedAt) {
		t.Error("b started leading before a's work had stopped")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.overlap {
		t.Error("two replicas worked at once")
	}
	if diff := cmp.Diff([]string{"a", "b"}, s.order); diff != "" {
		t.Errorf("leaders (-want +got):\n%s", diff)
	}
}

func TestStandbyTakesOverWhenTheLeaderDies(t *testing.T) {
	c := testcluster.Get(t)
	ns := c.Namespace(t, "leader", nil)
	s := &shared{}
	// A leader that dies does not release its Lease.
	oa := fastOptions(ns, "a")
	oa.ReleaseOnCancel = false
	a := start(t, c.Client(), oa, s)
	waitTime(t, a.leading, "a leads")
	b := start(t, c.Client(), fastOptions(ns, "b"), s)

	a.cancel()
	diedAt := waitTime(t, a.stopped, "a stops")
	tookOver := waitTime(t, b.leading, "b takes over")
	t.Logf("takeover after the leader died (lease not released): %v (lease duration %v)",
		tookOver.Sub(diedAt).Round(time.Millisecond), oa.LeaseDuration)
	lease, err := c.Client().CoordinationV1().Leases(ns).Get(context.Background(), "pcsync", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := *lease.Spec.HolderIdentity; got != "b" {
		t.Errorf("lease holder %q, want b", got)
	}
}

func TestLostLeaseStopsTheWork(t *testing.T) {
	c := testcluster.Get(t)
	ns := c.Namespace(t, "leader", nil)
	s := &shared{}
	a := start(t, c.Client(), fastOptions(ns, "a"), s)
	waitTime(t, a.leading, "a leads")

	// Someone else takes the Lease (as after a partition in which a could
	// not renew in time).
	ctx := context.Background()
	leases := c.Client().CoordinationV1().Leases(ns)
	for {
		l, err := leases.Get(ctx, "pcsync", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		l.Spec = coordinationv1.LeaseSpec{HolderIdentity: ptr.To("intruder"), LeaseDurationSeconds: ptr.To(int32(3600)),
			AcquireTime: &metav1.MicroTime{Time: time.Now()}, RenewTime: &metav1.MicroTime{Time: time.Now()}}
		if _, err := leases.Update(ctx, l, metav1.UpdateOptions{}); err == nil {
			break
		}
	}
	waitTime(t, a.stopped, "a stops its work")
	if err := a.wait(); !errors.Is(err, ErrLeadershipLost) {
		t.Errorf("Run = %v, want ErrLeadershipLost", err)
	}
}
