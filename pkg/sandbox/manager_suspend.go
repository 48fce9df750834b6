package sandbox

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/pcsync/pcsync/internal/lib/safefile"
	"github.com/pcsync/pcsync/pkg/sandbox/cmdclient"
)

// SuspendOutcome is how a suspend or a resume of a kept lease ended.
type SuspendOutcome string

// The suspend and resume outcomes.
const (
	// SuspendDone: the pod is gone (suspend), or runs again on the
	// lease's claim (resume).
	SuspendDone SuspendOutcome = "done"
	// SuspendFailed: the pod could not be deleted (the lease stays
	// ready), or did not start again (the lease stays suspended, or ends
	// when its claim is gone).
	SuspendFailed SuspendOutcome = "failed"
)

// The steps of a suspend and of a resume at which Options.testHook is
// called.
const (
	stepSuspendJournaled = "suspend-journaled" // the journal says suspended
	stepSuspendDeleted   = "suspend-deleted"   // the pod's delete was sent
	stepSuspended        = "suspended"         // the lease is suspended
	stepResumeBegun      = "resume-begun"      // the lease is resuming
	stepResumeCreated    = "resume-created"    // the new pod's create was sent
	stepResumeStarted    = "resume-started"    // it runs, not yet journaled
)

// step calls Options.testHook, when set, at step.
func (m *Manager) step(step string) {
	if m.opts.testHook != nil {
		m.opts.testHook(step)
	}
}

// suspendLoop suspends every kept lease idle for its idle time, checking
// every Options.SuspendCheck, and removes the orphaned claims every
// Options.ClaimSweep, until Close.
func (m *Manager) suspendLoop() {
	defer m.wg.Done()
	tick := time.NewTicker(m.opts.SuspendCheck)
	defer tick.Stop()
	lastSweep := time.Time{}
	for {
		select {
		case <-m.base().Done():
			return
		case now := <-tick.C:
			for _, l := range m.held() {
				if l.Keep == nil {
					continue
				}
				if c, ok := l.beginSuspend(time.Duration(l.Keep.IdleSec)*time.Second, now); ok {
					m.wg.Add(1)
					go m.suspend(l, c)
				}
			}
			if now.Sub(lastSweep) >= m.opts.ClaimSweep {
				lastSweep = now
				m.sweepClaims(m.base())
			}
		}
	}
}

// held returns the leases the manager holds.
func (m *Manager) held() []*lease {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]*lease, 0, len(m.leases))
	for _, l := range m.leases {
		out = append(out, l)
	}
	return out
}

// suspend ends suspending lease l's pod and keeps its claim: the journal
// says suspended first, then the pod is deleted (its UID a precondition)
// and waited gone. A pod that cannot be deleted leaves the lease ready.
func (m *Manager) suspend(l *lease, c *cmdclient.Client) {
	defer m.wg.Done()
	began := time.Now()
	ctx, cancel := context.WithTimeout(m.base(), m.opts.DeleteTimeout)
	defer cancel()
	// Where pods share the host, the command server outlives the pod: it
	// is stopped through the lease's own stream (a new one may not open
	// in time on a loaded host) and waited until it lets go of its
	// socket's lock, which it holds until its last cleanup: a next pod's
	// server started before that finds the lock held, and the old one's
	// end breaks the next pod's stream.
	switch {
	case m.opts.HostRoot != "":
		m.stopServer(ctx, l, c)
		if !waitUnlocked(ctx, l.Socket+".lock") {
			m.log.Warn("sandbox lease suspending: its command server still holds its socket's lock", slog.String("lease", l.ID), slog.String("socket", l.Socket))
		}
	case c != nil:
		_ = c.Close()
	}
	l.mu.Lock()
	uid, rec := l.PodUID, l.Record
	l.mu.Unlock()
	rec.Suspended, rec.PodUID = true, ""
	err := m.j.put(rec)
	if err == nil {
		m.step(stepSuspendJournaled)
		err = m.deletePod(ctx, l.Namespace, l.ID, uid)
	}
	if err == nil {
		m.step(stepSuspendDeleted)
		err = m.waitGone(ctx, l.Namespace, l.ID)
	}
	if err != nil {
		m.log.Warn("sandbox lease not suspended: its pod stays", slog.String("lease", l.ID), slog.Any("error", err))
		l.mu.Lock()
		back := l.Record
		l.mu.Unlock()
		if jerr := m.j.put(back); jerr != nil {
			m.log.Warn("sandbox: lease journal", slog.Any("error", jerr))
		}
		l.to(LeaseSuspending, LeaseReady)
		m.opts.Metrics.SandboxSuspend(l.Company, time.Since(began), string(SuspendFailed))
		return
	}
	l.mu.Lock()
	l.PodUID, l.Suspended, l.suspendedAt = "", true, time.Now()
	l.mu.Unlock()
	if !l.to(LeaseSuspending, LeaseSuspended) {
		return // ended meanwhile
	}
	m.countSuspended(l, true)
	m.opts.Metrics.SandboxSuspend(l.Company, time.Since(began), string(SuspendDone))
	m.log.Info("sandbox lease suspended: its pod is gone, its claim kept", slog.String("lease", l.ID),
		slog.Duration("took", time.Since(began).Round(time.Millisecond)))
	m.step(stepSuspended)
}

// ensureReady brings lease l back for a command: a suspend or resume
// under way is waited for, a suspended lease is resumed. A lease in any
// other state is left as it is (begin refuses what is not ready).
func (m *Manager) ensureReady(ctx context.Context, l *lease) error {
	for {
		switch l.State() {
		case LeaseSuspending, LeaseResuming:
			ch := l.changing()
			if ch == nil {
				continue
			}
			select {
			case <-ch:
			case <-ctx.Done():
				return fmt.Errorf("lease %s: waiting for its suspend or resume: %w", l.ID, ctx.Err())
			}
		case LeaseSuspended:
			if err := m.resume(ctx, l); err != nil {
				return err
			}
		default:
			return nil
		}
	}
}

// countSuspended counts lease l in the suspended leases' gauge (on) or no
// longer (off), once each way.
func (m *Manager) countSuspended(l *lease, on bool) {
	l.mu.Lock()
	was := l.counted
	l.counted = on
	l.mu.Unlock()
	switch {
	case on && !was:
		m.opts.Metrics.SandboxSuspended(l.Company, 1)
	case !on && was:
		m.opts.Metrics.SandboxSuspended(l.Company, -1)
	}
}

// waitUnlocked waits until no process holds the lock on path (true), for
// up to 10 s or until ctx ends (false).
func waitUnlocked(ctx context.Context, path string) bool {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for {
		if held, err := safefile.Held(path); err == nil && !held {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(20 * time.Millisecond):
		}
	}
}
