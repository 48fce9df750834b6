package cmdclient

import (
	"cmp"
	"context"
	"io"
	"log/slog"
	"math"
	"os"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// Opener opens a new byte stream to the server. ctx lives as long as the
// stream: the client cancels it when it closes the stream.
type Opener func(ctx context.Context) (io.ReadWriteCloser, error)

// Options configures a Client.
type Options struct {
	// Backoff is the wait before the first attempt to reopen a broken
	// stream; it doubles per failed attempt up to MaxBackoff.
	Backoff    time.Duration
	MaxBackoff time.Duration
	// ReconnectTimeout is how long the client tries to reopen a broken
	// stream before it fails every running Exec and becomes unusable.
	ReconnectTimeout time.Duration
	// Logger receives structured logs; nil: text to stderr.
	Logger *slog.Logger
	// OnReopen, when set, is called each time a broken stream was reopened
	// and its commands resumed (the daemon's metrics).
	OnReopen func()
}

// DefaultOptions returns the options the daemon uses.
func DefaultOptions() Options {
	return Options{Backoff: 50 * time.Millisecond, MaxBackoff: time.Second, ReconnectTimeout: 30 * time.Second}
}

// reconnectBackoff paces the attempts to reopen a broken stream: Backoff,
// doubling to MaxBackoff, then every MaxBackoff.
func (o Options) reconnectBackoff() wait.Backoff {
	return wait.Backoff{Duration: o.Backoff, Factor: 2, Steps: math.MaxInt32, Cap: o.MaxBackoff}
}

// complete fills the zero (or negative) fields with their defaults; a
// MaxBackoff below Backoff becomes the larger of its default and Backoff.
func (o *Options) complete() {
	d := DefaultOptions()
	o.Backoff = cmp.Or(max(o.Backoff, 0), d.Backoff)
	if o.MaxBackoff < o.Backoff {
		o.MaxBackoff = max(d.MaxBackoff, o.Backoff)
	}
	o.ReconnectTimeout = cmp.Or(max(o.ReconnectTimeout, 0), d.ReconnectTimeout)
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
}
