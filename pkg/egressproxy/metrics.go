package egressproxy

import "github.com/prometheus/client_golang/prometheus"

// Reasons of a refusal: the reason label of RefusedTotal.
const (
	ReasonHost    = "host_not_allowed"
	ReasonPort    = "port_not_allowed"
	ReasonAddress = "address_not_public"
	ReasonRequest = "bad_request"
)

// Metric names.
const (
	RefusedTotalName = "pcsync_egress_proxy_refused_total"
	AllowedTotalName = "pcsync_egress_proxy_allowed_total"
)

// metrics are the proxy's counters. Labels are bounded: the company (one
// per proxy) and a reason from the list above; never the host or the
// agent, which a client chooses.
type metrics struct {
	refused *prometheus.CounterVec
	allowed *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer, company string) (*metrics, error) {
	m := &metrics{
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name:        RefusedTotalName,
			Help:        "Requests the egress proxy refused, by reason (host_not_allowed, port_not_allowed, address_not_public, bad_request).",
			ConstLabels: prometheus.Labels{"company": company},
		}, []string{"reason"}),
		allowed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name:        AllowedTotalName,
			Help:        "Requests the egress proxy allowed (a tunnel or a plain request to an allowed host).",
			ConstLabels: prometheus.Labels{"company": company},
		}, nil),
	}
	for _, r := range []string{ReasonHost, ReasonPort, ReasonAddress, ReasonRequest} {
		m.refused.WithLabelValues(r)
	}
	m.allowed.WithLabelValues()
	if reg != nil {
		for _, c := range []prometheus.Collector{m.refused, m.allowed} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}
