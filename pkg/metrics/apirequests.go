package metrics

import (
	"net/http"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// apiRequestMetrics count the requests the daemon sends to the Kubernetes
// API server, as every client built from its rest.Config sends them.
type apiRequestMetrics struct {
	requests *prometheus.CounterVec
}

func newAPIRequestMetrics() *apiRequestMetrics {
	return &apiRequestMetrics{requests: prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "kube_api_requests_total",
		Help: "Requests sent to the Kubernetes API server, by verb (GET, WATCH, POST, PUT, PATCH, DELETE) and status code (\"error\" when none came back). A watch counts once, when it opens.",
	}, []string{"verb", "code"})}
}

// WrapTransport wraps a rest.Config's transport (rest.Config.Wrap) so that
// each request it carries is counted in pcsync_kube_api_requests_total.
func (m *Metrics) WrapTransport(rt http.RoundTripper) http.RoundTripper {
	return &countingTransport{next: rt, requests: m.apiRequests.requests}
}

// countingTransport counts each request by verb and status code.
type countingTransport struct {
	next     http.RoundTripper
	requests *prometheus.CounterVec
}

// RoundTrip implements http.RoundTripper.
func (t *countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	verb := req.Method
	if verb == http.MethodGet && req.URL.Query().Get("watch") == "true" {
		verb = "WATCH"
	}
	resp, err := t.next.RoundTrip(req)
	code := "error"
	if err == nil {
		code = strconv.Itoa(resp.StatusCode)
	}
	t.requests.WithLabelValues(verb, code).Inc()
	return resp, err
}
