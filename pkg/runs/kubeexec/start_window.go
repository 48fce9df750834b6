package kubeexec

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// startWindow bounds how many runs are being created (their Job and
// Secret requests) at once, with a limit that adapts to the API server the
// way TCP's congestion window does: it starts at its ceiling; when the
// server pushes back (a 429 Too Many Requests from API Priority and
// Fairness or the max-in-flight filter, a create that times out, or one
// slower than slow) it halves, at most once per cutEvery, down to its
// floor; after a cut it grows by one for every limit creates that succeed
// (additive increase, so it settles where the server copes instead of
// doubling back into it); and a quiet recoverAfter without pushback puts it
// back at the ceiling, so that the next burst starts wide again. Runs past
// the limit wait in arrival order. The client's own rate limiter
// (--kube-qps, --kube-burst) applies on top. Safe for concurrent use.
type startWindow struct {
	floor, ceiling int
	cutEvery       time.Duration
	recoverAfter   time.Duration
	// slow is the create time past which a create counts as pushback
	// (0: none).
	slow time.Duration
	// metrics, when set, is told every change of the limit.
	metrics WindowMetrics

	mu       sync.Mutex
	limit    int
	inflight int
	waiters  []chan struct{}
	lastCut  time.Time
	cuts     int
	// acks counts the creates answered since the limit last grew.
	acks int
}

// newStartWindow returns a window that starts at its ceiling: until the
// server pushes back, runs are created as fast as requests can go out.
func newStartWindow(ceiling int) *startWindow {
	floor := min(4, ceiling)
	return &startWindow{floor: floor, ceiling: ceiling, limit: ceiling, cutEvery: time.Second, recoverAfter: time.Minute}
}

// withMetrics makes m receive the window's changes, starting with its
// limit now.
func (w *startWindow) withMetrics(m WindowMetrics) *startWindow {
	if m != nil {
		w.metrics = m
		m.SetStartWindow(w.limit)
	}
	return w
}

// acquire waits for a place in the window; release gives it back.
func (w *startWindow) acquire(ctx context.Context) (release func(), err error) {
	w.mu.Lock()
	w.recoverLocked(time.Now())
	if w.inflight < w.limit && len(w.waiters) == 0 {
		w.inflight++
		w.mu.Unlock()
		return w.releaseOnce(), nil
	}
	ch := make(chan struct{})
	w.waiters = append(w.waiters, ch)
	w.mu.Unlock()
	select {
	case <-ch:
		return w.releaseOnce(), nil
	case <-ctx.Done():
		w.mu.Lock()
		defer w.mu.Unlock()
		select {
		case <-ch:
			// Handed a place while giving up: pass it on.
			w.inflight--
			w.admitLocked()
		default:
			for i, c := range w.waiters {
				if c == ch {
					w.waiters = append(w.waiters[:i], w.waiters[i+1:]...)
					break
				}
			}
		}
		return nil, ctx.Err()
	}
}

func (w *startWindow) releaseOnce() func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			w.mu.Lock()
			w.inflight--
			w.admitLocked()
			w.mu.Unlock()
		})
	}
}

// admitLocked hands free places to waiters, first come first served.
func (w *startWindow) admitLocked() {
	for len(w.waiters) > 0 && w.inflight < w.limit {
		ch := w.waiters[0]
		w.waiters[0] = nil
		w.waiters = w.waiters[1:]
		w.inflight++
		close(ch)
	}
}

// succeeded records a create the server accepted: every limit of them
// grow the window by one.
func (w *startWindow) succeeded() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.limit >= w.ceiling {
		return
	}
	if w.acks++; w.acks < w.limit {
		return
	}
	w.acks = 0
	w.setLimitLocked(w.limit + 1)
}

// recoverLocked puts the window back at its ceiling once recoverAfter has
// passed since the last cut.
func (w *startWindow) recoverLocked(now time.Time) {
	if w.limit < w.ceiling && now.Sub(w.lastCut) >= w.recoverAfter {
		w.acks = 0
		w.setLimitLocked(w.ceiling)
	}
}

// setLimitLocked changes the limit, lets waiters in if it grew, and tells
// the metrics.
func (w *startWindow) setLimitLocked(limit int) {
	w.limit = limit
	w.admitLocked()
	if w.metrics != nil {
		w.metrics.SetStartWindow(limit)
	}
}

// observe takes the outcome of a create and how long it took: a success
// grows the window; a timeout, a 429 or a success slower than slow (the
// server is saturated, though it still answers) is pushback.
func (w *startWindow) observe(err error, took time.Duration) {
	switch {
	case err == nil && w.slow > 0 && took > w.slow:
		w.pushedBack(time.Now())
	case err == nil:
		w.succeeded()
	case apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err) || apierrors.IsTooManyRequests(err) ||
		errors.Is(err, context.DeadlineExceeded):
		w.pushedBack(time.Now())
	}
}

// pushedBack records that the server asked pcsync to slow down.
func (w *startWindow) pushedBack(now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if now.Sub(w.lastCut) < w.cutEvery {
		return
	}
	w.lastCut = now
	w.cuts++
	w.acks = 0
	if w.metrics != nil {
		w.metrics.StartWindowCut()
	}
	w.setLimitLocked(max(w.floor, w.limit/2))
}

// WindowMetrics receives the start window's changes, for /metrics
// (pcsync_start_window, pcsync_start_window_cuts_total).
type WindowMetrics interface {
	// SetStartWindow is the window's limit now.
	SetStartWindow(limit int)
	// StartWindowCut counts one cut on pushback.
	StartWindowCut()
}

// state returns the current limit and how often it was cut.
func (w *startWindow) state() (limit, cuts int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.limit, w.cuts
}

// pushbackTransport tells a startWindow about every 429 answer: client-go
// retries those itself (after the server's Retry-After), so the caller
// would only see them as slowness.
type pushbackTransport struct {
	next   http.RoundTripper
	window *startWindow
}

// RoundTrip implements http.RoundTripper.
func (t pushbackTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err == nil && resp.StatusCode == http.StatusTooManyRequests {
		t.window.pushedBack(time.Now())
	}
	return resp, err
}
