package pool

import (
	"sync"
	"time"
)

// expectations are the creates and deletes of members the controller made
// and the informer has not reported yet, per pool, by pod name (the
// controller names its members; a claim, which also takes a member out of
// the cache, is no delete the controller expects). A pool's sync waits
// until its expectations are met, or older than their TTL: the lister does
// not count what is in flight, and a sync that trusted it would create or
// delete twice. The shape of client-go's controller.ControllerExpectations
// (UIDTrackingControllerExpectations for the deletes).
type expectations struct {
	ttl time.Duration
	now func() time.Time

	mu    sync.Mutex
	pools map[Key]*expected
}

// expected is one pool's operations in flight, and when the last was set.
type expected struct {
	creates, deletes map[string]bool
	at               time.Time
}

func newExpectations(ttl time.Duration, now func() time.Time) *expectations {
	return &expectations{ttl: ttl, now: now, pools: map[Key]*expected{}}
}

// expectCreate records a create of member name, before it is sent.
func (e *expectations) expectCreate(k Key, name string) { e.expect(k, name, true) }

// expectDelete records a delete of member name, before it is sent.
func (e *expectations) expectDelete(k Key, name string) { e.expect(k, name, false) }

func (e *expectations) expect(k Key, name string, create bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	x := e.pools[k]
	if x == nil {
		x = &expected{creates: map[string]bool{}, deletes: map[string]bool{}}
		e.pools[k] = x
	}
	if create {
		x.creates[name] = true
	} else {
		x.deletes[name] = true
	}
	x.at = e.now()
}

// created lowers pool k's creates by member name: the informer has it, or
// its create failed.
func (e *expectations) created(k Key, name string) { _ = e.observe(k, name, true) }

// deleted lowers pool k's deletes by member name: the informer saw it go
// (or being deleted), or its delete failed. It says whether the delete
// was expected.
func (e *expectations) deleted(k Key, name string) bool { return e.observe(k, name, false) }

func (e *expectations) observe(k Key, name string, create bool) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	x := e.pools[k]
	if x == nil {
		return false
	}
	ops := x.deletes
	if create {
		ops = x.creates
	}
	was := ops[name]
	delete(ops, name)
	if len(x.creates) == 0 && len(x.deletes) == 0 {
		delete(e.pools, k)
	}
	return was
}

// wait is how long pool k's sync must still wait for the operations in
// flight: 0 when there are none, or they are older than the TTL (they are
// then forgotten: an event was lost, or a create never reached the API
// server).
func (e *expectations) wait(k Key) time.Duration {
	e.mu.Lock()
	defer e.mu.Unlock()
	x := e.pools[k]
	if x == nil {
		return 0
	}
	if left := e.ttl - e.now().Sub(x.at); left > 0 {
		return left
	}
	delete(e.pools, k)
	return 0
}

// forget drops pool k's expectations (the pool is gone from the config
// and the cache).
func (e *expectations) forget(k Key) {
	e.mu.Lock()
	delete(e.pools, k)
	e.mu.Unlock()
}
