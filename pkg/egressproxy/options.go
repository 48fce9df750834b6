package egressproxy

import (
	"cmp"
	"log/slog"
	"net/http"
	"net/netip"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stripe/smokescreen/pkg/smokescreen"
)

// Options tune the proxy. The zero value is valid.
type Options struct {
	// ConnectTimeout bounds the dial to a destination. Default 10 seconds.
	ConnectTimeout time.Duration
	// IdleTimeout closes a tunnel or connection without traffic for that
	// long. Default 5 minutes.
	IdleTimeout time.Duration
	// ReadHeaderTimeout bounds reading a client's request head. Default
	// 30 seconds.
	ReadHeaderTimeout time.Duration
	// DNSTimeout bounds resolving a destination. Default 5 seconds.
	DNSTimeout time.Duration
	// Logger receives the decisions. Default slog.Default().
	Logger *slog.Logger
	// Registerer takes the proxy's metrics. Default none (they are kept
	// but not exported).
	Registerer prometheus.Registerer
	// Credentials serves the origin-form requests under
	// inject.PathPrefix (the credential route); nil: none are served.
	Credentials http.Handler

	// resolver replaces the system resolver; tests only (they resolve
	// test names to loopback stand-ins).
	resolver smokescreen.Resolver
	// allowRanges are addresses allowed though not public; tests only:
	// their targets listen on loopback, which no traffic of a test may
	// leave, and which the proxy refuses otherwise.
	allowRanges []netip.Prefix
}

// DefaultOptions returns the options the proxy uses for zero fields.
func DefaultOptions() Options {
	return Options{
		ConnectTimeout:    10 * time.Second,
		IdleTimeout:       5 * time.Minute,
		ReadHeaderTimeout: 30 * time.Second,
		DNSTimeout:        5 * time.Second,
	}
}

func (o *Options) complete() {
	d := DefaultOptions()
	o.ConnectTimeout = cmp.Or(max(o.ConnectTimeout, 0), d.ConnectTimeout)
	o.IdleTimeout = cmp.Or(max(o.IdleTimeout, 0), d.IdleTimeout)
	o.ReadHeaderTimeout = cmp.Or(max(o.ReadHeaderTimeout, 0), d.ReadHeaderTimeout)
	o.DNSTimeout = cmp.Or(max(o.DNSTimeout, 0), d.DNSTimeout)
	o.Logger = cmp.Or(o.Logger, slog.Default())
}
