package kubeexec

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"net"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/wait"
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

// retryBackoff paces untilAnswered: 200 ms, doubling to 5 s, then every
// 5 s until its context ends.
var retryBackoff = wait.Backoff{Duration: 200 * time.Millisecond, Factor: 2, Steps: math.MaxInt32, Cap: 5 * time.Second}

// untilAnswered calls do until it returns nil or an error that is not
// transient, or ctx ends (then ctx's error, wrapping the last failure). While
// the API server is away a run's Job is created when it is back, instead of
// the run failing; the first failure is logged once.
func untilAnswered(ctx context.Context, log *slog.Logger, what string, do func() error) error {
	attempts, err := retry(ctx, retryBackoff, func() (bool, error) {
		err := do()
		return !transient(err), err
	}, func(attempt int, err error, _ time.Duration) {
		if attempt == 1 {
			log.Warn("the API server is unreachable or overloaded; trying again until it answers",
				slog.String("request", what), slog.Any("error", err))
		}
	})
	if attempts > 1 && err == nil {
		log.Info("the API server answered again", slog.String("request", what), slog.Int("attempts", attempts))
	}
	return err
}

// retry calls try at once, then again after each of b's delays, until try
// says it is done or ctx ends. It returns how many times try was called and
// try's last error, or, when ctx ended first, ctx's error joined with try's
// last error. failed, if not nil, hears of each attempt that was not done
// (its number from 1, its error) and the delay before the next.
func retry(ctx context.Context, b wait.Backoff, try func() (done bool, err error), failed func(attempt int, err error, in time.Duration)) (int, error) {
	next := b.DelayFunc()
	attempts, finished := 0, false
	var last error
	err := wait.DelayFunc(func() time.Duration {
		// Called after each attempt that was not done, for the wait that follows.
		d := next()
		if failed != nil {
			failed(attempts, last, d)
		}
		return d
	}).Until(ctx, true, true, func(context.Context) (bool, error) {
		attempts++
		finished, last = try()
		return finished, nil
	})
	if finished {
		return attempts, last
	}
	return attempts, errors.Join(err, last)
}
