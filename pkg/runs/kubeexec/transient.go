package kubeexec

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilnet "k8s.io/apimachinery/pkg/util/net"
)

// transient says whether a request failed because the API server was away
// or overloaded rather than because of what was asked: connection refused,
// reset or lost, a timeout, 429, 503, 504 (not 500: a webhook or a bug may
// answer it for ever). Such a request may or may
// not have been carried out; the callers repeat it in a form that is safe
// either way (a create answers AlreadyExists the second time).
func transient(err error) bool {
	if err == nil {
		return false
	}
	if apierrors.IsTooManyRequests(err) || apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) ||
		apierrors.IsServiceUnavailable(err) {
		return true
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		return false // any other answer of the server is its final word
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false // the caller's own deadline
	}
	var ne net.Error
	return utilnet.IsConnectionRefused(err) || utilnet.IsConnectionReset(err) || utilnet.IsProbableEOF(err) ||
		utilnet.IsHTTP2ConnectionLost(err) || (errors.As(err, &ne) && ne.Timeout())
}

// retryBackoff bounds the wait between two attempts of untilAnswered.
var retryBackoff = struct{ min, max time.Duration }{200 * time.Millisecond, 5 * time.Second}

// untilAnswered calls do until it returns nil or an error that is not
// transient, or ctx ends (then ctx's error, wrapping the last failure). While
// the API server is away a run's Job is created when it is back, instead of
// the run failing; the first failure is logged once.
func untilAnswered(ctx context.Context, log *slog.Logger, what string, do func() error) error {
	wait := retryBackoff.min
	for attempt := 1; ; attempt++ {
		err := do()
		if !transient(err) {
			if attempt > 1 && err == nil {
				log.Info("the API server answered again", slog.String("request", what), slog.Int("attempts", attempt))
			}
			return err
		}
		if attempt == 1 {
			log.Warn("the API server is unreachable or overloaded; trying again until it answers",
				slog.String("request", what), slog.Any("error", err))
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return errors.Join(ctx.Err(), err)
		case <-t.C:
		}
		wait = min(2*wait, retryBackoff.max)
	}
}
