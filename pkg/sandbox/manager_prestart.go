package sandbox

import (
	"context"
	"fmt"
	"log/slog"
	"reflect"
	"sync"
	"time"
)

// A prestart begins a run's lease when Paperclip starts the run, before it
// asks for the lease: Paperclip publishes agent.run.started when it claims
// a run, a few hundred ms before the run's acquireLease, and the plugin
// forwards it with the params of the agent's last acquire. The run's
// acquire then takes the lease begun for it (its pod created, or running
// already) instead of starting one. A lease no acquire takes is ended
// (EndUnclaimed).

// earlyLease is a lease begun for a run by Prestart.
type earlyLease struct {
	p     AcquireParams
	begun time.Time
	// done is closed when the lease's acquire is over: info or err.
	done chan struct{}
	info LeaseInfo
	err  error
	// unclaimed ends the lease when no acquire took it in time.
	unclaimed *time.Timer
}

// prestarts are the runs' early leases no acquire has taken yet, and the
// runs whose lease was asked for (so that a prestart arriving after the
// acquire begins nothing).
type prestarts struct {
	mu    sync.Mutex
	byRun map[string]*earlyLease
	asked map[string]bool
	// order is asked's runs, oldest first.
	order []string
}

// maxAskedRuns bounds the runs prestarts remembers as asked for.
const maxAskedRuns = 4096

// add registers e as run's early lease and arms expire after wait; "" when
// it was added, else why not.
func (ps *prestarts) add(run string, e *earlyLease, limit int, wait time.Duration, expire func()) string {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	switch {
	case ps.asked[run] || ps.byRun[run] != nil:
		return "the run's lease is already asked for or begun"
	case len(ps.byRun) >= limit:
		return fmt.Sprintf("%d prestarted leases wait for their runs' acquires already", len(ps.byRun))
	}
	if ps.byRun == nil {
		ps.byRun = map[string]*earlyLease{}
	}
	ps.byRun[run] = e
	e.unclaimed = time.AfterFunc(wait, expire)
	return ""
}

// stop disarms every early lease's expiry: a stopping daemon ends none
// (the journal marks them prestarted; the next daemon deletes their pods).
func (ps *prestarts) stop() {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	for _, e := range ps.byRun {
		e.unclaimed.Stop()
	}
}

// take removes and returns run's early lease (nil: none), and remembers
// the run as asked for.
func (ps *prestarts) take(run string) *earlyLease {
	if run == "" {
		return nil
	}
	ps.mu.Lock()
	defer ps.mu.Unlock()
	e := ps.byRun[run]
	delete(ps.byRun, run)
	if e != nil {
		e.unclaimed.Stop()
	}
	if !ps.asked[run] {
		if ps.asked == nil {
			ps.asked = map[string]bool{}
		}
		ps.asked[run] = true
		ps.order = append(ps.order, run)
		if len(ps.order) > maxAskedRuns {
			delete(ps.asked, ps.order[0])
			ps.order = ps.order[1:]
		}
	}
	return e
}

// Prestart begins run p.RunID's lease now, in the background, unless the
// environment turns prestarts off, the run's lease was asked for already,
// the agent holds a lease of the environment that Paperclip may resume, or
// too many prestarted leases wait. It says whether it began one, and if
// not, why.
func (m *Manager) Prestart(p AcquireParams) (bool, string) {
	switch {
	case p.RunID == "":
		return false, "no runId"
	case m.model() == nil:
		return false, "pcsync has no valid config loaded yet"
	case p.Config.NoPrestart:
		return false, "the environment sets prestart: false"
	case m.closing.Load():
		return false, "the daemon is stopping"
	case m.mayResume(p):
		return false, "the agent holds a lease of this environment, which reuses leases: Paperclip resumes it"
	}
	p.RequestedExpiresAt = nil
	e := &earlyLease{p: p, begun: time.Now(), done: make(chan struct{})}
	expire := func() {
		if m.closing.Load() {
			return
		}
		if m.early.take(p.RunID) == e {
			m.dropEarly(e, fmt.Sprintf("no acquire within %s", m.opts.PrestartWait))
		}
	}
	if why := m.early.add(p.RunID, e, m.opts.PrestartMax, m.opts.PrestartWait, expire); why != "" {
		return false, why
	}
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		defer close(e.done)
		e.info, e.err = m.acquire(m.base(), p, true)
		if e.err != nil {
			m.opts.Metrics.SandboxPrestart(p.Config.Company, string(PrestartFailed))
			m.log.Info("sandbox: a lease prestarted for its run failed; the run's acquire starts afresh",
				slog.String("run", p.RunID), slog.Any("error", e.err))
		}
	}()
	m.log.Info("sandbox lease prestarted for its run", slog.String("run", p.RunID), slog.String("agent", p.AgentID),
		slog.String("company", p.Config.Company))
	return true, ""
}

// mayResume says the agent of p holds a lease of p's environment that
// Paperclip may resume for the run (the environment sets reuseLease).
func (m *Manager) mayResume(p AcquireParams) bool {
	if reuse, _ := p.Config.Core["reuseLease"].(bool); !reuse || p.AgentID == "" {
		return false
	}
	m.mu.Lock()
	var agents []*lease
	for _, l := range m.leases {
		if l.AgentID == p.AgentID && l.EnvironmentID == p.EnvironmentID {
			agents = append(agents, l)
		}
	}
	m.mu.Unlock()
	for _, l := range agents {
		if s := l.State(); s == LeaseReady || s == LeasePending {
			return true
		}
	}
	return false
}

// adoptEarly gives the acquire p the lease begun early for its run, e; ok
// false when the acquire must start its own: e was begun for other params,
// or it failed or ended meanwhile (e is then dropped).
func (m *Manager) adoptEarly(ctx context.Context, e *earlyLease, p AcquireParams) (_ LeaseInfo, ok bool, _ error) {
	asked := time.Now()
	if why := e.p.differs(p); why != "" {
		m.dropEarly(e, why)
		return LeaseInfo{}, false, nil
	}
	select {
	case <-e.done:
	case <-ctx.Done():
		m.dropEarly(e, "its run's acquire gave up waiting for it")
		return LeaseInfo{}, true, fmt.Errorf("run %s: waiting for the lease begun for it: %w", p.RunID, ctx.Err())
	}
	if e.err != nil {
		return LeaseInfo{}, false, nil
	}
	l := m.lookup(e.info.ID)
	if l == nil || !l.claim() {
		return LeaseInfo{}, false, nil // it ended meanwhile
	}
	if err := m.journalLease(l); err != nil {
		m.log.Warn("sandbox: lease journal", slog.Any("error", err))
	}
	m.opts.Metrics.SandboxPrestart(l.Company, string(PrestartAdopted))
	// headStart: how much sooner than its acquire the lease began;
	// waited: how long the acquire then waited for it.
	m.log.Info("sandbox lease prestarted for its run taken by its acquire", slog.String("lease", l.ID), slog.String("run", p.RunID),
		slog.Duration("headStart", asked.Sub(e.begun).Round(time.Millisecond)), slog.Duration("waited", time.Since(asked).Round(time.Millisecond)))
	return e.info, true, nil
}

// differs says why acquire params q ask for another lease than e's, the
// lease begun early; "" when it is theirs.
func (p AcquireParams) differs(q AcquireParams) string {
	switch {
	case q.RequestedExpiresAt != nil:
		return "the acquire asks for an expiry of its own"
	case p.CompanyID != q.CompanyID || p.EnvironmentID != q.EnvironmentID:
		return "the acquire is of another environment"
	case p.AgentID != q.AgentID || p.AdapterType != q.AdapterType:
		return "the acquire is of another agent or adapter type"
	case !reflect.DeepEqual(p.Config, q.Config):
		return "the acquire's environment config differs"
	}
	return ""
}

// dropEarly ends early lease e once its acquire is over, unless that
// failed: no acquire takes it.
func (m *Manager) dropEarly(e *earlyLease, why string) {
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		<-e.done
		if e.err != nil {
			return
		}
		l := m.lookup(e.info.ID)
		if l == nil {
			return
		}
		m.opts.Metrics.SandboxPrestart(l.Company, string(PrestartUnclaimed))
		m.log.Info("sandbox lease prestarted for its run not taken: deleting its pod", slog.String("lease", l.ID),
			slog.String("run", e.p.RunID), slog.String("why", why))
		m.releaseAsync(l, EndUnclaimed)
	}()
}

// claim marks a prestarted lease taken by its run's acquire; false when it
// was not prestarted or is no longer Ready.
func (l *lease) claim() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.unclaimed || l.state != LeaseReady {
		return false
	}
	l.unclaimed = false
	return true
}

// journalLease writes lease l's record to the journal, as prestarted while
// no acquire has taken it. Under l.mu: a later write is of a later state.
func (m *Manager) journalLease(l *lease) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	r := l.Record
	r.Prestarted = l.unclaimed
	return m.j.put(r)
}
