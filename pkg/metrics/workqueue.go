package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/util/workqueue"
)

// workqueueMetrics are client-go work queue metrics, one series per queue
// name, in the daemon's registry (client-go's own provider would register
// them globally).
type workqueueMetrics struct {
	depth, unfinished, longest *prometheus.GaugeVec
	adds, retries              *prometheus.CounterVec
	latency, workDuration      *prometheus.HistogramVec
}

func newWorkqueueMetrics() *workqueueMetrics {
	const sub = "workqueue"
	buckets := prometheus.ExponentialBuckets(0.0005, 4, 10) // 0.5 ms … 131 s
	label := []string{"name"}
	return &workqueueMetrics{
		depth: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Subsystem: sub, Name: "depth",
			Help: "Keys waiting in a work queue."}, label),
		adds: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Subsystem: sub, Name: "adds_total",
			Help: "Keys added to a work queue."}, label),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: namespace, Subsystem: sub, Name: "queue_duration_seconds",
			Help: "How long a key waits in a work queue before a worker takes it.", Buckets: buckets}, label),
		workDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: namespace, Subsystem: sub, Name: "work_duration_seconds",
			Help: "How long a worker takes with a key.", Buckets: buckets}, label),
		unfinished: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Subsystem: sub, Name: "unfinished_work_seconds",
			Help: "Seconds of work in progress not yet observed by work_duration_seconds."}, label),
		longest: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Subsystem: sub, Name: "longest_running_processor_seconds",
			Help: "Seconds the longest running worker of a work queue has been at its key."}, label),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Subsystem: sub, Name: "retries_total",
			Help: "Keys put back into a work queue with a rate limit."}, label),
	}
}

func (w *workqueueMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{w.depth, w.adds, w.latency, w.workDuration, w.unfinished, w.longest, w.retries}
}

// Workqueue returns a client-go workqueue.MetricsProvider whose queues
// report into these metrics (pcsync_workqueue_*{name="<queue>"}).
func (m *Metrics) Workqueue() workqueue.MetricsProvider { return m.workqueue }

// NewDepthMetric implements workqueue.MetricsProvider.
func (w *workqueueMetrics) NewDepthMetric(name string) workqueue.GaugeMetric {
	return w.depth.WithLabelValues(name)
}

// NewAddsMetric implements workqueue.MetricsProvider.
func (w *workqueueMetrics) NewAddsMetric(name string) workqueue.CounterMetric {
	return w.adds.WithLabelValues(name)
}

// NewLatencyMetric implements workqueue.MetricsProvider.
func (w *workqueueMetrics) NewLatencyMetric(name string) workqueue.HistogramMetric {
	return w.latency.WithLabelValues(name)
}

// NewWorkDurationMetric implements workqueue.MetricsProvider.
func (w *workqueueMetrics) NewWorkDurationMetric(name string) workqueue.HistogramMetric {
	return w.workDuration.WithLabelValues(name)
}

// NewUnfinishedWorkSecondsMetric implements workqueue.MetricsProvider.
func (w *workqueueMetrics) NewUnfinishedWorkSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return w.unfinished.WithLabelValues(name)
}

// NewLongestRunningProcessorSecondsMetric implements workqueue.MetricsProvider.
func (w *workqueueMetrics) NewLongestRunningProcessorSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return w.longest.WithLabelValues(name)
}

// NewRetriesMetric implements workqueue.MetricsProvider.
func (w *workqueueMetrics) NewRetriesMetric(name string) workqueue.CounterMetric {
	return w.retries.WithLabelValues(name)
}
