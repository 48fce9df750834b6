package sandbox

import (
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/pcsync/pcsync/pkg/sandbox/cmdclient"
	"github.com/pcsync/pcsync/pkg/sandbox/leasepod"
)

// LeaseState is where a lease is in its life.
type LeaseState string

// The lease states, in order.
const (
	// LeasePending: recorded, its pod created, not yet running.
	LeasePending LeaseState = "Pending"
	// LeaseReady: the pod runs; executes are taken.
	LeaseReady LeaseState = "Ready"
	// LeaseDraining: a release without cancel waits for the executes in
	// flight; no new executes.
	LeaseDraining LeaseState = "Draining"
	// LeaseSuspending: a kept lease idle for its idle time: its pod is
	// being deleted, its claim kept; an execute waits for its resume.
	LeaseSuspending LeaseState = "Suspending"
	// LeaseSuspended: no pod; the claim keeps its workspace and HOME.
	LeaseSuspended LeaseState = "Suspended"
	// LeaseResuming: a pod mounting the claim is being created and
	// started; an execute waits for it.
	LeaseResuming LeaseState = "Resuming"
	// LeaseEnding: the end has begun: command server shutdown, pod delete,
	// wait until it is gone.
	LeaseEnding LeaseState = "Ending"
	// LeaseGone: the end is over (the pod is gone, or the end failed: see
	// the lease's err).
	LeaseGone LeaseState = "Gone"
)

// leaseTransitions lists the changes of state a lease may make.
var leaseTransitions = map[LeaseState][]LeaseState{
	LeasePending:  {LeaseReady, LeaseEnding},
	LeaseReady:    {LeaseDraining, LeaseSuspending, LeaseEnding},
	LeaseDraining: {LeaseEnding},
	// Back to ready when the pod could not be deleted.
	LeaseSuspending: {LeaseSuspended, LeaseReady, LeaseEnding},
	LeaseSuspended:  {LeaseResuming, LeaseEnding},
	// Back to suspended when the pod did not start (it is deleted).
	LeaseResuming: {LeaseReady, LeaseSuspended, LeaseEnding},
	LeaseEnding:   {LeaseGone},
}

// lease is a live lease: its record and what the daemon holds for it.
//
// Its life: pending (pod created) → ready (pod running) → draining (a
// release waits for the executes in flight) → ending (server shutdown, pod
// delete) → gone. A cancel, the expiry or a failure goes from any state
// straight to ending. A kept lease idle for its idle time goes ready →
// suspending (pod delete) → suspended → resuming (a pod on its claim) →
// ready. Every change of state goes through
// to (or end, which is to from the state the lease is in).
type lease struct {
	// Set by track and never changed.
	leasepod.Record
	rule   EnvRule
	expiry *time.Timer
	// gone is closed once the lease is gone; err says then why its end
	// failed (nil: its pod is gone).
	gone chan struct{}

	// Guarded by mu.
	mu    sync.Mutex
	state LeaseState
	// running counts the executes in flight.
	running int
	// idle is made when the lease starts draining and closed once running
	// is 0 then: every release of the lease waits on the same channel.
	idle chan struct{}
	// client is the open command stream; opening is the open under way,
	// if any: every caller that waits on it gets its outcome.
	client  *cmdclient.Client
	opening *openAttempt
	warned  map[string]bool
	// token is the lease's credential token once an execute needed one
	// (its hash is on the pod: package tokensync).
	token string
	// codexConfig: codex's system config is written in the pod.
	codexConfig bool
	// held: counted in the metrics' leases held (from track to the end).
	held bool
	// unclaimed: begun for its run by Prestart, and no acquire took it yet.
	unclaimed bool
	// lastUsed is when its last command ended (or it became ready): a
	// kept lease idle for its idle time since is suspended.
	lastUsed time.Time
	// settled is made when a suspend or resume begins and closed when it
	// ends: the executes that came meanwhile wait on it.
	settled chan struct{}
	// counted: counted in the metrics' suspended leases.
	counted bool
	// suspendedAt is when its last suspend ended (zero: before this
	// daemon); resumed is what the next execute with a notice says of its
	// last resume ("": nothing to say).
	suspendedAt time.Time
	resumed     string
	err         error
}

func newLease(r leasepod.Record) *lease {
	return &lease{Record: r, state: LeasePending, gone: make(chan struct{}), warned: map[string]bool{}}
}

// State returns the lease's state.
func (l *lease) State() LeaseState {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.state
}

// to moves the lease from state from to state next and says whether it
// did: not when the lease is in another state already (an expiry and a
// release race; the first one wins). A change that leaseTransitions does
// not list is a bug in this package: to panics.
func (l *lease) to(from, next LeaseState) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.toLocked(from, next)
}

func (l *lease) toLocked(from, next LeaseState) bool {
	if !slices.Contains(leaseTransitions[from], next) {
		panic(fmt.Sprintf("sandbox: a lease cannot go from %s to %s", from, next))
	}
	if l.state != from {
		return false
	}
	l.state = next
	switch next {
	case LeaseSuspending, LeaseResuming:
		l.settled = make(chan struct{})
	case LeaseReady:
		l.lastUsed = time.Now()
	}
	if (from == LeaseSuspending || from == LeaseResuming) && l.settled != nil {
		close(l.settled)
		l.settled = nil
	}
	if next == LeaseDraining {
		l.idle = make(chan struct{})
		if l.running == 0 {
			close(l.idle)
		}
	}
	return true
}

// end moves the lease to ending from the state it is in and takes its
// command stream; ok is false when its end has begun already.
func (l *lease) end() (c *cmdclient.Client, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.state == LeaseEnding || l.state == LeaseGone {
		return nil, false
	}
	l.toLocked(l.state, LeaseEnding)
	c, l.client = l.client, nil
	return c, true
}

// drain moves a ready lease to draining and returns the channel closed once
// its executes in flight are done: the same channel for every caller. It is
// nil when the lease never drained (pending, or its end began first).
func (l *lease) drain() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.state == LeaseReady {
		l.toLocked(LeaseReady, LeaseDraining)
	}
	return l.idle
}

// begin counts an execute in flight; an error when the lease takes no new
// executes.
func (l *lease) begin() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.state != LeaseReady {
		return fmt.Errorf("lease %s: state %s: no new commands", l.ID, l.state)
	}
	l.running++
	return nil
}

// done ends an execute begun with begin; the last one of a draining lease
// closes its idle channel.
func (l *lease) done() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.running--
	l.lastUsed = time.Now()
	if l.running == 0 && l.state == LeaseDraining {
		close(l.idle)
	}
}

// finish moves an ending lease to gone with why its end failed (nil: its
// pod is gone) and wakes whoever waits for its end.
func (l *lease) finish(err error) {
	l.mu.Lock()
	l.err = err
	l.toLocked(LeaseEnding, LeaseGone)
	l.mu.Unlock()
	close(l.gone)
}

// endErr is why the lease's end failed, once gone is closed.
func (l *lease) endErr() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// beginSuspend moves a ready kept lease that has had no command in flight
// for idle to suspending and takes its command stream; ok is false when
// it is not so (busy, its stream opening, used lately, or in another
// state).
func (l *lease) beginSuspend(idle time.Duration, now time.Time) (c *cmdclient.Client, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.Keep == nil || l.state != LeaseReady || l.running > 0 || l.opening != nil || now.Sub(l.lastUsed) < idle {
		return nil, false
	}
	l.toLocked(LeaseReady, LeaseSuspending)
	c, l.client = l.client, nil
	return c, true
}

// takeResumed returns what the lease's last resume left to say, once.
func (l *lease) takeResumed() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := l.resumed
	l.resumed = ""
	return n
}

// changing is the channel closed when the suspend or resume under way
// ends; nil when none is.
func (l *lease) changing() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.settled
}
