package sandbox

import (
	"errors"
	"time"

	"github.com/pcsync/pcsync/pkg/sandbox/pool"
)

// Metrics receives what the manager does, for the daemon's /metrics
// (pcsync_sandbox_*; pkg/metrics implements it). Its labels are config
// company slugs and the fixed words below: never a lease, run or agent id,
// nor an env key's name or value.
type Metrics interface {
	// SandboxLeases adds delta (+1 or -1) to the leases held for company.
	SandboxLeases(company string, delta int)
	// SandboxAcquire observes an acquire that took d and ended with
	// outcome (an AcquireOutcome); code is a refusal's UserError code, or
	// empty.
	SandboxAcquire(d time.Duration, outcome, code string)
	// SandboxRelease counts a lease's end by its reason (an EndReason).
	SandboxRelease(reason string)
	// SandboxExecute observes a command of company's lease that took d
	// and ended with outcome (an ExecOutcome).
	SandboxExecute(company string, d time.Duration, outcome string)
	// SandboxStreamReopen counts a command stream that broke and was
	// reopened.
	SandboxStreamReopen()
	// SandboxEnvKeysKept counts n env keys of one execute of company's
	// lease kept from its pod by the lease's EnvRule.
	SandboxEnvKeysKept(company string, n int)
	// SandboxKeysReplaced counts n key variables of one execute of
	// company's lease whose values were dropped for a declared credential.
	SandboxKeysReplaced(company string, n int)
	// SandboxSync counts a native sync mapping of company's lease in
	// direction (a SyncDirection) that ended with outcome (an ExecOutcome)
	// and moved n bytes.
	SandboxSync(company, direction, outcome string, n int)
	// SandboxPoolClaim counts an acquire of company's lease by where its
	// pod came from (a ClaimOutcome).
	SandboxPoolClaim(company, outcome string)
	// SandboxPrestart counts a lease begun for company's run before
	// Paperclip asked for it, by how it ended (a PrestartOutcome).
	SandboxPrestart(company, outcome string)
	// SandboxSuspend observes a suspend of company's kept lease that took
	// d and ended with outcome (a SuspendOutcome).
	SandboxSuspend(company string, d time.Duration, outcome string)
	// SandboxResume observes a resume of company's suspended lease that
	// took d and ended with outcome (a SuspendOutcome).
	SandboxResume(company string, d time.Duration, outcome string)
	// SandboxSuspended adds delta (+1 or -1) to company's suspended leases.
	SandboxSuspended(company string, delta int)
	// pool.Metrics: the warm pools' (SandboxPool, SandboxPoolReady,
	// SandboxPoolActing).
	pool.Metrics
}

// SyncDirection is the way a native sync mapping goes.
type SyncDirection string

// The sync directions.
const (
	// SyncIn: host → lease pod (Paperclip's syncIn).
	SyncIn SyncDirection = "in"
	// SyncOut: lease pod → host (Paperclip's syncOut).
	SyncOut SyncDirection = "out"
)

// ClaimOutcome is where an acquire's pod came from.
type ClaimOutcome string

// The claim outcomes.
const (
	// ClaimWarm: a Ready member of a warm pool.
	ClaimWarm ClaimOutcome = "warm"
	// ClaimMiss: a cold start though the lease's pod has a warm pool (no
	// member was Ready).
	ClaimMiss ClaimOutcome = "miss"
	// ClaimCold: a cold start: no warm pool declares the lease's pod.
	ClaimCold ClaimOutcome = "cold"
)

// AcquireOutcome is how an acquire ended.
type AcquireOutcome string

// The acquire outcomes.
const (
	// AcquireReady: the lease's pod runs; the lease is Paperclip's.
	AcquireReady AcquireOutcome = "ready"
	// AcquireRefused: a UserError (config, image, quota, …): its code says
	// what to fix.
	AcquireRefused AcquireOutcome = "refused"
	// AcquireFailed: any other error (the API server, a pod that ended).
	AcquireFailed AcquireOutcome = "failed"
)

// EndReason is how a lease ended.
type EndReason string

// The reasons a lease ends.
const (
	// EndDrained: released once its executes in flight had finished.
	EndDrained EndReason = "drained"
	// EndCancelled: released with its commands killed (cancelActiveWork,
	// destroyLease, or its run cancelled).
	EndCancelled EndReason = "cancelled"
	// EndExpired: its expiry passed (or had passed when a daemon started).
	EndExpired EndReason = "expired"
	// EndFailed: its acquire failed after its pod was created, or its
	// command server never answered.
	EndFailed EndReason = "failed"
	// EndUnclaimed: begun for its run before Paperclip asked for it
	// (Prestart), and not taken by the run's acquire: none came within
	// Options.PrestartWait, it asked for another lease, or the run was
	// cancelled.
	EndUnclaimed EndReason = "unclaimed"
	// EndAdopted: a lease of an earlier daemon, taken over from the
	// journal at start, whose pod was found gone or replaced.
	EndAdopted EndReason = "adopted"
)

// PrestartOutcome is how a lease begun before its run's acquire ended.
type PrestartOutcome string

// The prestart outcomes.
const (
	// PrestartAdopted: the run's acquire took it.
	PrestartAdopted PrestartOutcome = "adopted"
	// PrestartUnclaimed: no acquire took it; its pod was deleted
	// (EndUnclaimed).
	PrestartUnclaimed PrestartOutcome = "unclaimed"
	// PrestartFailed: its acquire failed; the run's own acquire starts
	// afresh.
	PrestartFailed PrestartOutcome = "failed"
)

// ExecOutcome is how an execute ended.
type ExecOutcome string

// The execute outcomes.
const (
	// ExecCompleted: the command ended with an exit status or a signal.
	ExecCompleted ExecOutcome = "completed"
	// ExecFailed: no status: the lease was not ready, or its stream was lost.
	ExecFailed ExecOutcome = "failed"
)

// noMetrics is the Metrics of a manager given none.
type noMetrics struct{}

func (noMetrics) SandboxLeases(string, int)                    {}
func (noMetrics) SandboxAcquire(time.Duration, string, string) {}
func (noMetrics) SandboxRelease(string)                        {}
func (noMetrics) SandboxExecute(string, time.Duration, string) {}
func (noMetrics) SandboxStreamReopen()                         {}
func (noMetrics) SandboxEnvKeysKept(string, int)               {}
func (noMetrics) SandboxKeysReplaced(string, int)              {}
func (noMetrics) SandboxSync(string, string, string, int)      {}
func (noMetrics) SandboxPool(string, int, int, int)            {}
func (noMetrics) SandboxPoolClaim(string, string)              {}
func (noMetrics) SandboxPoolReady(string, time.Duration)       {}
func (noMetrics) SandboxPrestart(string, string)               {}
func (noMetrics) SandboxPoolActing(bool)                       {}
func (noMetrics) SandboxSuspend(string, time.Duration, string) {}
func (noMetrics) SandboxResume(string, time.Duration, string)  {}
func (noMetrics) SandboxSuspended(string, int)                 {}

// observeAcquire records an acquire that began at began and returned err.
func (m *Manager) observeAcquire(began time.Time, err error) {
	outcome, code := AcquireReady, ""
	var ue *UserError
	switch {
	case errors.As(err, &ue):
		outcome, code = AcquireRefused, string(ue.Code)
	case err != nil:
		outcome = AcquireFailed
	}
	m.opts.Metrics.SandboxAcquire(time.Since(began), string(outcome), code)
}

// AcquireRefused counts an acquire refused (err) before it reached
// Acquire, its params not decoded, as Acquire counts its own refusals.
func (m *Manager) AcquireRefused(err error) { m.observeAcquire(time.Now(), err) }

// hold counts a tracked lease as held.
func (m *Manager) hold(l *lease) {
	l.mu.Lock()
	l.held = true
	l.mu.Unlock()
	m.opts.Metrics.SandboxLeases(l.Company, 1)
}

// unhold counts a lease as no longer held, once.
func (m *Manager) unhold(l *lease) {
	l.mu.Lock()
	held := l.held
	l.held = false
	l.mu.Unlock()
	if held {
		m.opts.Metrics.SandboxLeases(l.Company, -1)
	}
}
