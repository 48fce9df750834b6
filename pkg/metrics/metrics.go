// Package metrics holds pcsync's Prometheus metrics in a registry of their
// own (no global state), and the helpers that record a reconcile or a run
// result in them.
package metrics

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/pcsync/pcsync/pkg/result"
)

const namespace = "pcsync"

// Metrics are the daemon's metrics. Create them with New; the zero value is
// not usable.
type Metrics struct {
	// Registry holds every metric below plus the Go and process collectors.
	Registry *prometheus.Registry

	// ReconcileDuration observes whole reconciles (load → apply), by outcome.
	ReconcileDuration *prometheus.HistogramVec
	// ReconcileErrors counts failed reconciles by the stage that failed
	// (load, render, apply, prune).
	ReconcileErrors *prometheus.CounterVec
	// ConfigValid is 1 while the last loaded config was valid, else 0.
	ConfigValid prometheus.Gauge
	// LastSuccess is the Unix time of the last successful reconcile.
	LastSuccess prometheus.Gauge
	// ObjectsApplied counts objects by apply action (created, configured,
	// unchanged, pruned, failed).
	ObjectsApplied *prometheus.CounterVec
	// DriftCorrections counts objects changed by a reconcile whose config
	// had not changed since the previous one: drift made in the cluster.
	DriftCorrections prometheus.Counter
	// Prunes counts objects deleted by prune.
	Prunes prometheus.Counter
	// PruneBlocked is the number of tenants a prune held by the prune guard
	// would remove (it waits for approval); 0 when no prune is held.
	PruneBlocked prometheus.Gauge
	// PaperclipAgents counts Paperclip agents handled by a reconcile, by
	// action (created, configured, resumed, paused, unchanged, refused,
	// failed).
	PaperclipAgents *prometheus.CounterVec
	// PaperclipDrift counts Paperclip agents put back after a hand edit of
	// a field pcsync manages.
	PaperclipDrift prometheus.Counter
	// PaperclipRequests counts requests sent to Paperclip's API, by kind
	// (read, write).
	PaperclipRequests *prometheus.CounterVec
	// Leader is 1 while this replica holds the leader Lease (or runs
	// without leader election), else 0.
	Leader prometheus.Gauge

	// Runs counts finished runs by status, adapter and company.
	Runs *prometheus.CounterVec
	// RunsQueued is the number of accepted runs waiting for a slot.
	RunsQueued prometheus.Gauge
	// RunsInFlight is the number of runs started and not finished.
	RunsInFlight prometheus.Gauge
	// RunDuration observes run durations by adapter and status.
	RunDuration *prometheus.HistogramVec
	// Tokens counts tokens by company, agent and kind (input, cached_input,
	// cache_creation, output).
	Tokens *prometheus.CounterVec
	// CostUSD counts the CLIs' reported cost by company and agent.
	CostUSD *prometheus.CounterVec
	// StartWindow is the Kubernetes executor's start window: how many runs
	// may be being created at once now.
	StartWindow prometheus.Gauge
	// StartWindowCuts counts the window's cuts on the API server's pushback.
	StartWindowCuts prometheus.Counter
	// PaperclipUnreachable counts reconciles whose Paperclip side could not
	// reach Paperclip's API (no answer at all: refused, timed out, no
	// route, a name that does not resolve).
	PaperclipUnreachable prometheus.Counter

	workqueue   *workqueueMetrics
	apiRequests *apiRequestMetrics
	sandbox     *sandboxMetrics
	// own are the collectors above, as New registered them.
	own []prometheus.Collector
}

// New creates the metrics in a fresh registry.
func New() *Metrics {
	m := &Metrics{
		Registry:    prometheus.NewRegistry(),
		workqueue:   newWorkqueueMetrics(),
		sandbox:     newSandboxMetrics(),
		apiRequests: newAPIRequestMetrics(),
	}
	m.reconcileMetrics()
	m.paperclipMetrics()
	m.runMetrics()
	m.initLabels()
	m.own = append([]prometheus.Collector{
		m.ReconcileDuration, m.ReconcileErrors, m.ConfigValid, m.LastSuccess,
		m.ObjectsApplied, m.DriftCorrections, m.Prunes, m.PruneBlocked, m.Leader,
		m.PaperclipAgents, m.PaperclipDrift, m.PaperclipRequests,
		m.Runs, m.RunsQueued, m.RunsInFlight, m.RunDuration, m.Tokens, m.CostUSD,
		m.StartWindow, m.StartWindowCuts, m.PaperclipUnreachable, m.apiRequests.requests,
	}, append(m.workqueue.collectors(), m.sandbox.collectors()...)...)
	m.Registry.MustRegister(m.own...)
	m.Registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Collectors returns pcsync's own collectors in Registry (not Go's and the
// process's), for the metrics reference (hack/genmetrics).
func (m *Metrics) Collectors() []prometheus.Collector { return m.own }

// reconcileMetrics creates the config loop's metrics.
func (m *Metrics) reconcileMetrics() {
	m.ReconcileDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: namespace, Name: "reconcile_duration_seconds",
		Help:    "Duration of config reconciles (load, validate, render, apply, prune).",
		Buckets: []float64{.05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120},
	}, []string{"outcome"})
	m.ReconcileErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "reconcile_errors_total",
		Help: "Failed reconciles by the stage that failed.",
	}, []string{"stage"})
	m.ConfigValid = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: namespace, Name: "config_valid",
		Help: "1 while the last loaded config was valid, else 0 (the last good state is kept).",
	})
	m.LastSuccess = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: namespace, Name: "reconcile_last_success_timestamp_seconds",
		Help: "Unix time of the last successful reconcile.",
	})
	m.ObjectsApplied = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "objects_applied_total",
		Help: "Objects handled by apply, by action.",
	}, []string{"action"})
	m.DriftCorrections = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: namespace, Name: "drift_corrections_total",
		Help: "Objects changed by a reconcile while the config had not changed: drift corrected.",
	})
	m.Prunes = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: namespace, Name: "pruned_objects_total",
		Help: "Objects deleted by prune.",
	})
	m.PruneBlocked = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: namespace, Name: "prune_blocked",
		Help: "Tenants a prune held by the prune guard would remove; it waits for approval (0: none held).",
	})
	m.Leader = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: namespace, Name: "leader",
		Help: "1 while this replica leads (reconciles and runs agents), else 0.",
	})
}

// paperclipMetrics creates the metrics of the Paperclip side of a reconcile.
func (m *Metrics) paperclipMetrics() {
	m.PaperclipAgents = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "paperclip_agents_total",
		Help: "Paperclip agents handled by a reconcile, by action.",
	}, []string{"action"})
	m.PaperclipDrift = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: namespace, Name: "paperclip_drift_corrections_total",
		Help: "Paperclip agents put back after a hand edit of a field pcsync manages.",
	})
	m.PaperclipRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "paperclip_requests_total",
		Help: "Requests sent to Paperclip's API, by kind (read, write).",
	}, []string{"kind"})
	m.PaperclipUnreachable = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: namespace, Name: "paperclip_unreachable_total",
		Help: "Reconciles whose Paperclip side got no answer from Paperclip's API (refused, timed out, unresolvable).",
	})
}

// runMetrics creates the runs loop's metrics.
func (m *Metrics) runMetrics() {
	m.Runs = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "runs_total",
		Help: "Finished runs by status, adapter and company.",
	}, []string{"status", "adapter", "company"})
	m.RunsQueued = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: namespace, Name: "runs_queued",
		Help: "Accepted runs waiting for a concurrency slot.",
	})
	m.RunsInFlight = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: namespace, Name: "runs_in_flight",
		Help: "Runs started and not yet finished.",
	})
	m.RunDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: namespace, Name: "run_duration_seconds",
		Help:    "Run durations by adapter and status.",
		Buckets: []float64{1, 5, 15, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200},
	}, []string{"adapter", "status"})
	m.Tokens = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "tokens_total",
		Help: "Tokens used by runs, by company, agent and kind (input, cached_input, cache_creation, output).",
	}, []string{"company", "agent", "kind"})
	m.CostUSD = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "cost_usd_total",
		Help: "Cost reported by the agent CLIs, in US dollars, by company and agent.",
	}, []string{"company", "agent"})
	m.StartWindow = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: namespace, Name: "start_window",
		Help: "How many runs the Kubernetes executor may be creating at once now (halves on the API server's pushback).",
	})
	m.StartWindowCuts = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: namespace, Name: "start_window_cuts_total",
		Help: "Cuts of the Kubernetes executor's start window on a 429, a timeout or a slow create.",
	})
}

// initLabels creates the series of the known, fixed label values at 0, so
// that /metrics has them from the start and an alert on their increase sees
// the first one (a counter's first sample is not an increase).
func (m *Metrics) initLabels() {
	for _, stage := range []string{"load", "render", "apply", "prune", "paperclip"} {
		m.ReconcileErrors.WithLabelValues(stage)
	}
	for _, action := range []string{"created", "configured", "resumed", "paused", "unchanged", "refused", "failed"} {
		m.PaperclipAgents.WithLabelValues(action)
	}
	for _, kind := range []string{"read", "write"} {
		m.PaperclipRequests.WithLabelValues(kind)
	}
	m.sandbox.initLabels()
}

// SetStartWindow sets pcsync_start_window (kubeexec.WindowMetrics).
func (m *Metrics) SetStartWindow(limit int) { m.StartWindow.Set(float64(limit)) }

// StartWindowCut counts a cut of the start window (kubeexec.WindowMetrics).
func (m *Metrics) StartWindowCut() { m.StartWindowCuts.Inc() }

// Handler serves the registry in the Prometheus exposition format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{Registry: m.Registry})
}

// ObserveRun records a finished run: its status, duration, tokens and cost.
func (m *Metrics) ObserveRun(r result.RunResult) {
	m.Runs.WithLabelValues(string(r.Status), r.Adapter, r.Company).Inc()
	if r.DurationMs != nil {
		m.RunDuration.WithLabelValues(r.Adapter, string(r.Status)).Observe(float64(*r.DurationMs) / 1000)
	}
	if u := r.Usage; u != nil {
		for kind, n := range map[string]int64{
			"input": u.InputTokens, "cached_input": u.CachedInputTokens,
			"cache_creation": u.CacheCreationInputTokens, "output": u.OutputTokens,
		} {
			if n > 0 {
				m.Tokens.WithLabelValues(r.Company, r.Agent, kind).Add(float64(n))
			}
		}
	}
	if r.CostUSD != nil && *r.CostUSD > 0 {
		m.CostUSD.WithLabelValues(r.Company, r.Agent).Add(*r.CostUSD)
	}
}

// ObserveReconcile records a reconcile's duration and outcome; failedStage is
// empty on success.
func (m *Metrics) ObserveReconcile(d time.Duration, failedStage string, now time.Time) {
	if failedStage == "" {
		m.ReconcileDuration.WithLabelValues("success").Observe(d.Seconds())
		m.LastSuccess.Set(float64(now.Unix()))
		return
	}
	m.ReconcileDuration.WithLabelValues("error").Observe(d.Seconds())
	m.ReconcileErrors.WithLabelValues(failedStage).Inc()
}
