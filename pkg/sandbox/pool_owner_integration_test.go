//go:build integration

package sandbox

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/pcsync/pcsync/pkg/sandbox/pool"
)

// churn counts the pool members that appear (creates) and go (deletes) in
// a namespace, from an informer of the owner's members.
type churn struct {
	mu      sync.Mutex
	created map[string]bool
	deleted map[string]bool
}

func watchChurn(t *testing.T, e *poolEnv) *churn {
	t.Helper()
	ch := &churn{created: map[string]bool{}, deleted: map[string]bool{}}
	f := informers.NewSharedInformerFactoryWithOptions(e.c.Client(), 0, informers.WithNamespace(e.ns),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = pool.LabelOwner + "=" + e.owner }))
	inf := f.Core().V1().Pods().Informer()
	mark := func(m map[string]bool) func(any) {
		return func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if p, ok := obj.(*corev1.Pod); ok {
				ch.mu.Lock()
				m[p.Name] = true
				ch.mu.Unlock()
			}
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: mark(ch.created), DeleteFunc: mark(ch.deleted)}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	f.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("the churn informer did not sync")
	}
	return ch
}

func (ch *churn) counts() (created, deleted int) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	return len(ch.created), len(ch.deleted)
}

// startTogether starts a Manager of the env's owner for each name at
// once (two daemons started together: both find the pool empty).
func startTogether(t *testing.T, e *poolEnv, names []string) []*Manager {
	t.Helper()
	ms := make([]*Manager, len(names))
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Go(func() { ms[i], errs[i] = e.poolManager(name) })
	}
	wg.Wait()
	for i, m := range ms {
		if m != nil {
			t.Cleanup(m.Close)
		}
		if errs[i] != nil {
			t.Fatalf("%s: %v", names[i], errs[i])
		}
	}
	return ms
}

// leadership is which of ms acts on the owner's pools (-1: none or more
// than one) and the holder each names.
func leadership(ms ...*Manager) (acting int, holders []string) {
	acting = -1
	for i, m := range ms {
		acting1, holder := m.pools.Leadership()
		holders = append(holders, holder)
		switch {
		case acting1 && acting == -1:
			acting = i
		case acting1:
			return -1, holders
		}
	}
	return acting, holders
}

// waitLeader waits until exactly one of ms acts and every one names it.
func waitLeader(t *testing.T, e *poolEnv, names []string, ms ...*Manager) int {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		i, holders := leadership(ms...)
		agreed := i >= 0
		for _, h := range holders {
			agreed = agreed && h == names[i]
		}
		if agreed {
			return i
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting for one pool controller to act: acting %d, holders %v\nlogs:\n%s", i, holders, e.logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Two daemons of one owner (one ApplySet, no --leader-elect), started
// together, run one config with a pool of 1. Only the holder of the owner's Lease keeps the
// pool, the other stands by: the pool is whole (1 member Ready) and
// quiet (one create, no delete) for 20 s. Then the holder closes (its
// Lease released): the other takes over and keeps the same member, with
// no create and no delete.
func TestPoolTwoControllersOneOwner(t *testing.T) {
	e := newPoolTenant(t, 1)
	ch := watchChurn(t, e)
	names := []string{"daemon-a", "daemon-b"}
	ms := startTogether(t, e, names)
	e.pm = ms[0]
	first := e.waitPool(t, "the pool to fill", 1, nil)
	holder := waitLeader(t, e, names, ms...)
	standby := 1 - holder

	time.Sleep(20 * time.Second)
	if got := e.waitPool(t, "the pool whole after 20 s", 1, nil); got[0] != first[0] {
		t.Errorf("member %s replaced by %s in 20 s", first[0], got[0])
	}
	if created, deleted := ch.counts(); created != 1 || deleted != 0 {
		t.Errorf("in 20 s with two controllers: %d members created, %d deleted; want 1 and 0\nlogs:\n%s", created, deleted, e.logs.String())
	}
	if i, holders := leadership(ms...); i != holder {
		t.Errorf("after 20 s: controller %d acts (holders %v); want %s alone", i, holders, names[holder])
	}
	if want := "pool controller of owner " + e.owner + ": standing by, held by " + names[holder]; !strings.Contains(e.logs.String(), want) {
		t.Errorf("the standby's log says nothing like %q:\n%s", want, e.logs.String())
	}
	for i, m := range ms {
		for _, s := range m.Pools() {
			if s.Acting != (i == holder) || s.Holder != names[holder] {
				t.Errorf("%s's pool status acting %v, holder %q; want %v, %q", names[i], s.Acting, s.Holder, i == holder, names[holder])
			}
		}
	}

	closed := time.Now()
	ms[holder].Close()
	if got := waitLeader(t, e, names[standby:standby+1], ms[standby]); got != 0 {
		t.Fatalf("after the holder closed, the standby does not act")
	}
	t.Logf("takeover: %s acts %v after %s closed", names[standby], time.Since(closed).Round(time.Millisecond), names[holder])
	e.pm = ms[standby]
	time.Sleep(3 * time.Second) // a few syncs of the new holder
	if got := e.waitPool(t, "the pool kept by the new holder", 1, nil); got[0] != first[0] {
		t.Errorf("after the takeover, member %s replaced by %s", first[0], got[0])
	}
	if created, deleted := ch.counts(); created != 1 || deleted != 0 {
		t.Errorf("after the takeover: %d members created, %d deleted; want 1 and 0\nlogs:\n%s", created, deleted, e.logs.String())
	}
}
