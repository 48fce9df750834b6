package kube

import (
	"net/http"
	"strings"
	"sync/atomic"

	"k8s.io/client-go/rest"
)

// RequestCounter counts the HTTP requests that clients built from a rest.Config send,
// split into reads (GET, HEAD, OPTIONS: get, list, watch, discovery) and mutations
// (POST, PUT, PATCH, DELETE). Server-side dry-run requests count as mutations because
// they use mutating verbs. Requests the server refused with 429 Too Many Requests
// (which client-go sends again by itself) are counted too, and apart in TooMany. It
// is safe for concurrent use; the zero value is ready.
type RequestCounter struct {
	reads     atomic.Int64
	mutations atomic.Int64
	tooMany   atomic.Int64
}

// Instrument makes every client built from cfg (after this call) count its requests in
// c. It composes with any WrapTransport already set on cfg.
func (c *RequestCounter) Instrument(cfg *rest.Config) {
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			if IsMutatingMethod(req.Method) {
				c.mutations.Add(1)
			} else {
				c.reads.Add(1)
			}
			resp, err := rt.RoundTrip(req)
			if err == nil && resp.StatusCode == http.StatusTooManyRequests {
				c.tooMany.Add(1)
			}
			return resp, err
		})
	})
}

// Reads returns the number of non-mutating requests counted so far.
func (c *RequestCounter) Reads() int64 { return c.reads.Load() }

// Mutations returns the number of mutating requests counted so far.
func (c *RequestCounter) Mutations() int64 { return c.mutations.Load() }

// TooMany returns the number of requests counted so far that the server answered
// with 429 Too Many Requests.
func (c *RequestCounter) TooMany() int64 { return c.tooMany.Load() }

// Reset sets every count to zero.
func (c *RequestCounter) Reset() {
	c.reads.Store(0)
	c.mutations.Store(0)
	c.tooMany.Store(0)
}

// IsMutatingMethod reports whether an HTTP method changes state on the API server.
func IsMutatingMethod(method string) bool {
	switch strings.ToUpper(method) {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return false
	default:
		return true
	}
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }
