package inject

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// The outcomes of a request to the credential route; the refusals of a
// token are exported for Verifier implementations.
const (
	outcomeForwarded       = "forwarded"
	outcomeUnknown         = "unknown_credential"
	outcomeBadToken        = OutcomeBadToken
	outcomeRunEnded        = OutcomeRunEnded
	outcomeNoKey           = "key_unreadable"
	outcomeProviderRefused = "provider_refused"
	outcomeUpstreamFailed  = "upstream_failed"
)

// A Verifier's refusals: a token that no pod at the address carries (a
// forged one, another pod's, another tenant's), and the token of a run
// whose pod has ended.
const (
	OutcomeBadToken = "bad_token"
	OutcomeRunEnded = "run_ended"
)

// unknownCredential is the credential label of a request that names none
// of the company's (a path a client chose: never a label value).
const unknownCredential = "(unknown)"

type metrics struct{ requests *prometheus.CounterVec }

func newMetrics(reg prometheus.Registerer, company string) (*metrics, error) {
	m := &metrics{requests: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name:        "pcsync_egress_proxy_credential_requests_total",
		Help:        "Requests to the egress proxy's credential route, by credential and outcome.",
		ConstLabels: prometheus.Labels{"company": company},
	}, []string{"credential", "outcome"})}
	if reg == nil {
		return m, nil
	}
	if err := reg.Register(m.requests); err != nil {
		var are prometheus.AlreadyRegisteredError
		if !errors.As(err, &are) {
			return nil, err
		}
		m.requests = are.ExistingCollector.(*prometheus.CounterVec)
	}
	return m, nil
}

func (m *metrics) count(credential, outcome string) {
	m.requests.WithLabelValues(credential, outcome).Inc()
}
