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
// Secret requests) at once, with a limit that adapts to the API server:
// every create that succeeds raises it by one, up to its ceiling; when the
// server pushes back (a 429 Too Many Requests from API Priority and
// Fairness or the max-in-flight filter, or a create that times out) it
// halves, at most once per cutEvery, down to its floor. Runs past the
// limit wait in arrival order. The client's own rate limiter (--kube-qps,
// --kube-burst) applies on top. Safe for concurrent use.
type startWindow struct {
	floor, ceiling int
	cutEvery       time.Duration

	mu       sync.Mutex
	limit    int
	inflight int
	waiters  []chan struct{}
	lastCut  time.Time
	cuts     int
}

// newStartWindow returns a window that starts at its ceiling: until the
// server pushes back, runs are created as fast as requests can go out.
func newStartWindow(ceiling int) *startWindow {
	floor := min(4, ceiling)
	return &startWindow{floor: floor, ceiling: ceiling, limit: ceiling, cutEvery: time.Second}
}

// acquire waits for a place in the window; release gives it back.
func (w *startWindow) acquire(ctx context.Context) (release func(), err error) {
	w.mu.Lock()
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

// succeeded records a create the server accepted.
func (w *startWindow) succeeded() {
	w.mu.Lock()
	if w.limit < w.ceiling {
		w.limit++
		w.admitLocked()
	}
	w.mu.Unlock()
}

// observe takes the outcome of a create: a success grows the window, a
// timeout is pushback.
func (w *startWindow) observe(err error) {
	switch {
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
	w.limit = max(w.floor, w.limit/2)
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
