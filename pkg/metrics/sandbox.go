package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// sandboxMetrics are the sandbox provider's metrics (pkg/sandbox): leases,
// acquires, releases, executes, command streams and the env keys kept from
// lease pods. Their labels are config company slugs and fixed words, never
// a lease, run or agent id nor an env key, so their series stay few.
type sandboxMetrics struct {
	leases          *prometheus.GaugeVec
	acquireDuration *prometheus.HistogramVec
	refusals        *prometheus.CounterVec
	releases        *prometheus.CounterVec
	executes        *prometheus.CounterVec
	executeDuration prometheus.Histogram
	reopens         prometheus.Counter
	envKeysKept     *prometheus.CounterVec
	keysReplaced    *prometheus.CounterVec
	syncs           *prometheus.CounterVec
	syncBytes       *prometheus.CounterVec
	poolDeclared    *prometheus.GaugeVec
	poolMembers     *prometheus.GaugeVec
	poolReady       *prometheus.GaugeVec
	poolClaims      *prometheus.CounterVec
	prestarts       *prometheus.CounterVec
	poolRefill      prometheus.Histogram
	poolActing      prometheus.Gauge
	suspended       *prometheus.GaugeVec
	suspends        *prometheus.CounterVec
	resumes         *prometheus.CounterVec
	resumeDuration  prometheus.Histogram
}

func newSandboxMetrics() *sandboxMetrics {
	const sub = "sandbox"
	return &sandboxMetrics{
		leases: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Subsystem: sub, Name: "leases_active",
			Help: "Sandbox leases this daemon holds (a pod each), by company."}, []string{"company"}),
		acquireDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: namespace, Subsystem: sub, Name: "acquire_duration_seconds",
			Help:    "Duration of lease acquires (config check → pod running → command server answering), by outcome (ready, refused, failed).",
			Buckets: []float64{.1, .25, .5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300}}, []string{"outcome"}),
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Subsystem: sub, Name: "acquire_refusals_total",
			Help: "Lease acquires refused with a reason the user can fix, by its code (quota_full, image_not_allowed, …)."}, []string{"code"}),
		releases: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Subsystem: sub, Name: "releases_total",
			Help: "Ended sandbox leases, by how they ended (drained, cancelled, expired, failed, adopted, unclaimed)."}, []string{"reason"}),
		executes: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Subsystem: sub, Name: "executes_total",
			Help: "Commands run on sandbox leases, by company and outcome (completed: it has an exit status; failed: none)."}, []string{"company", "outcome"}),
		executeDuration: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: namespace, Subsystem: sub, Name: "execute_duration_seconds",
			Help:    "Duration of commands run on sandbox leases.",
			Buckets: []float64{.01, .05, .1, .25, .5, 1, 2.5, 5, 15, 60, 300, 1800, 3600}}),
		reopens: prometheus.NewCounter(prometheus.CounterOpts{Namespace: namespace, Subsystem: sub, Name: "stream_reopens_total",
			Help: "Lease command streams (pod execs) that broke and were reopened with their commands resumed."}),
		envKeysKept: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Subsystem: sub, Name: "env_keys_kept_total",
			Help: "Env keys of executes kept from the lease pods by the env rule (a count; the names are logged once per lease, values never), by company."}, []string{"company"}),
		keysReplaced: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Subsystem: sub, Name: "credential_keys_replaced_total",
			Help: "Key variables of executes whose values the daemon dropped for the company's declared credential (spec.credentials: the lease gets a token and the proxy's route instead; values never logged), by company."}, []string{"company"}),
		syncs: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Subsystem: sub, Name: "syncs_total",
			Help: "Native workspace sync mappings moved to (in) or from (out) lease pods, by company, direction and outcome (completed, failed)."}, []string{"company", "direction", "outcome"}),
		syncBytes: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Subsystem: sub, Name: "sync_bytes_total",
			Help: "Bytes of native workspace sync mappings moved to (in) or from (out) lease pods, by company and direction."}, []string{"company", "direction"}),
		poolDeclared: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Subsystem: sub, Name: "pool_declared",
			Help: "Warm pool members the config declares (Company spec.sandbox.warmPool), by company."}, []string{"company"}),
		poolMembers: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Subsystem: sub, Name: "pool_members",
			Help: "Warm pool members that exist (not being deleted or claimed), by company; a pool being drained counts here, not in pool_declared."}, []string{"company"}),
		poolReady: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Subsystem: sub, Name: "pool_ready",
			Help: "Warm pool members Ready to be claimed, by company."}, []string{"company"}),
		poolClaims: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Subsystem: sub, Name: "pool_claims_total",
			Help: "Lease pods by where they came from, by company and outcome (warm: a claimed pool member; miss: a cold start though a pool declares the pod; cold: no pool declares it)."}, []string{"company", "outcome"}),
		prestarts: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Subsystem: sub, Name: "prestarts_total",
			Help: "Leases begun when Paperclip started their run, before it asked for them, by company and outcome (adopted: the run's acquire took it; unclaimed: none did, its pod was deleted; failed: it failed, the acquire started afresh)."}, []string{"company", "outcome"}),
		poolRefill: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: namespace, Subsystem: sub, Name: "pool_refill_seconds",
			Help:    "Time from a warm pool member's create to Ready: how soon a pool is whole again after a claim.",
			Buckets: []float64{.25, .5, 1, 2, 5, 10, 30, 60, 180}}),
		poolActing: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: namespace, Subsystem: sub, Name: "pool_acting",
			Help: "1 while this daemon's warm pool controller holds its owner's Lease and keeps the pools; 0 while it stands by (another daemon of the same ApplySet keeps them)."}),
		suspended: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Subsystem: sub, Name: "leases_suspended",
			Help: "Kept leases suspended (no pod; their claim keeps the workspace and HOME), by company."}, []string{"company"}),
		suspends: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Subsystem: sub, Name: "suspends_total",
			Help: "Suspends of idle kept leases, by company and outcome (done: the pod is gone; failed: it could not be deleted, the lease stays ready)."}, []string{"company", "outcome"}),
		resumes: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Subsystem: sub, Name: "resumes_total",
			Help: "Resumes of suspended leases, by company and outcome (done: a pod runs on the claim; failed: the lease stays suspended, or ended when its claim is gone)."}, []string{"company", "outcome"}),
		resumeDuration: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: namespace, Subsystem: sub, Name: "resume_duration_seconds",
			Help:    "Duration of resumes of suspended leases (claim checked → pod on the claim running → command server answering).",
			Buckets: []float64{.25, .5, 1, 2, 3, 5, 10, 20, 60, 300}}),
	}
}

// initLabels creates the series of sandbox.AcquireOutcome's and
// sandbox.EndReason's values at 0.
func (s *sandboxMetrics) initLabels() {
	for _, outcome := range []string{"ready", "refused", "failed"} {
		s.acquireDuration.WithLabelValues(outcome)
	}
	for _, reason := range []string{"drained", "cancelled", "expired", "failed", "adopted", "unclaimed"} {
		s.releases.WithLabelValues(reason)
	}
}

func (s *sandboxMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{s.leases, s.acquireDuration, s.refusals, s.releases, s.executes, s.executeDuration, s.reopens, s.envKeysKept, s.keysReplaced, s.syncs, s.syncBytes,
		s.poolDeclared, s.poolMembers, s.poolReady, s.poolClaims, s.prestarts, s.poolRefill, s.poolActing,
		s.suspended, s.suspends, s.resumes, s.resumeDuration}
}

// SandboxLeases adds delta to pcsync_sandbox_leases_active{company}
// (sandbox.Metrics).
func (m *Metrics) SandboxLeases(company string, delta int) {
	m.sandbox.leases.WithLabelValues(company).Add(float64(delta))
}

// SandboxAcquire observes an acquire that took d and ended with outcome
// (ready, refused, failed); a refusal also counts its code
// (sandbox.Metrics).
func (m *Metrics) SandboxAcquire(d time.Duration, outcome, code string) {
	m.sandbox.acquireDuration.WithLabelValues(outcome).Observe(d.Seconds())
	if code != "" {
		m.sandbox.refusals.WithLabelValues(code).Inc()
	}
}

// SandboxRelease counts an ended lease by how it ended (sandbox.Metrics).
func (m *Metrics) SandboxRelease(reason string) { m.sandbox.releases.WithLabelValues(reason).Inc() }

// SandboxExecute observes a command of company's lease that took d and
// ended with outcome (completed, failed) (sandbox.Metrics).
func (m *Metrics) SandboxExecute(company string, d time.Duration, outcome string) {
	m.sandbox.executes.WithLabelValues(company, outcome).Inc()
	m.sandbox.executeDuration.Observe(d.Seconds())
}

// SandboxStreamReopen counts a command stream reopened after it broke
// (sandbox.Metrics).
func (m *Metrics) SandboxStreamReopen() { m.sandbox.reopens.Inc() }

// SandboxEnvKeysKept counts n env keys of an execute of company's lease
// kept from its pod (sandbox.Metrics).
func (m *Metrics) SandboxEnvKeysKept(company string, n int) {
	m.sandbox.envKeysKept.WithLabelValues(company).Add(float64(n))
}

// SandboxKeysReplaced counts n key variables of an execute of company's
// lease replaced by its credential's token (sandbox.Metrics).
func (m *Metrics) SandboxKeysReplaced(company string, n int) {
	m.sandbox.keysReplaced.WithLabelValues(company).Add(float64(n))
}

// SandboxSync counts a native sync mapping of company's lease in direction
// (in, out) that ended with outcome (completed, failed) and moved n bytes
// (sandbox.Metrics).
func (m *Metrics) SandboxSync(company, direction, outcome string, n int) {
	m.sandbox.syncs.WithLabelValues(company, direction, outcome).Inc()
	m.sandbox.syncBytes.WithLabelValues(company, direction).Add(float64(n))
}

// SandboxPool sets pcsync_sandbox_pool_{declared,members,ready}{company}
// (sandbox.Metrics).
func (m *Metrics) SandboxPool(company string, declared, members, ready int) {
	m.sandbox.poolDeclared.WithLabelValues(company).Set(float64(declared))
	m.sandbox.poolMembers.WithLabelValues(company).Set(float64(members))
	m.sandbox.poolReady.WithLabelValues(company).Set(float64(ready))
}

// SandboxPoolClaim counts an acquire's pod by where it came from (warm,
// miss, cold) (sandbox.Metrics).
func (m *Metrics) SandboxPoolClaim(company, outcome string) {
	m.sandbox.poolClaims.WithLabelValues(company, outcome).Inc()
}

// SandboxPrestart counts a prestarted lease by how it ended
// (sandbox.Metrics).
func (m *Metrics) SandboxPrestart(company, outcome string) {
	m.sandbox.prestarts.WithLabelValues(company, outcome).Inc()
}

// SandboxPoolReady observes a warm pool member's create → Ready
// (sandbox.Metrics).
func (m *Metrics) SandboxPoolReady(_ string, d time.Duration) {
	m.sandbox.poolRefill.Observe(d.Seconds())
}

// SandboxPoolActing sets pcsync_sandbox_pool_acting (sandbox.Metrics).
func (m *Metrics) SandboxPoolActing(acting bool) {
	v := 0.0
	if acting {
		v = 1
	}
	m.sandbox.poolActing.Set(v)
}

// SandboxSuspend counts a suspend of company's kept lease by its outcome
// (done, failed) (sandbox.Metrics).
func (m *Metrics) SandboxSuspend(company string, _ time.Duration, outcome string) {
	m.sandbox.suspends.WithLabelValues(company, outcome).Inc()
}

// SandboxResume counts a resume of company's suspended lease by its
// outcome and observes its duration (sandbox.Metrics).
func (m *Metrics) SandboxResume(company string, d time.Duration, outcome string) {
	m.sandbox.resumes.WithLabelValues(company, outcome).Inc()
	m.sandbox.resumeDuration.Observe(d.Seconds())
}

// SandboxSuspended adds delta to pcsync_sandbox_leases_suspended{company}
// (sandbox.Metrics).
func (m *Metrics) SandboxSuspended(company string, delta int) {
	m.sandbox.suspended.WithLabelValues(company).Add(float64(delta))
}
