package sandbox

import (
	"context"
	"errors"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/pcsync/pcsync/pkg/sandbox/leasepod"
)

// earlyOpenInterval is how often a cold lease tries its pod's command
// server while the pod starts.
const earlyOpenInterval = 75 * time.Millisecond

// openEarly tries the command server of cold lease r's pod from its create
// on, every earlyOpenInterval, until one open answers, one is refused for
// good, or wait passes. The kubelet reports a started container only at its
// next relist of the container runtime (once a second), while an exec
// reaches the container as soon as it runs: a lease whose command server
// answers is ready then, up to a second before its pod's status says
// Running. Its stream is handed to connect as a pool member's is.
func (m *Manager) openEarly(r leasepod.Record, wait time.Duration) *warmStream {
	ctx, cancel := context.WithTimeout(m.base(), wait)
	ws := &warmStream{done: make(chan struct{}), cancel: cancel}
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		defer cancel()
		defer close(ws.done)
		l := newLease(r)
		for {
			c, err := m.dial(ctx, l)
			if err == nil {
				ws.c = c
				return
			}
			ws.err = err
			if refusedForGood(err) {
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(earlyOpenInterval):
			}
		}
	}()
	return ws
}

// errOpenedEarly ends the wait for a pod's Running status once its command
// server answered.
var errOpenedEarly = errors.New("the command server answered")

// waitStarted waits until the pod runs (waitRunning) or, sooner, until the
// early stream ws answers; a failure waitRunning sees ends the wait at once
// with its reason.
func (m *Manager) waitStarted(ctx context.Context, pod *corev1.Pod, ws *warmStream) error {
	if ws == nil {
		return m.waitRunning(ctx, pod)
	}
	wctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	go func() {
		select {
		case <-ws.done:
			if ws.c != nil {
				cancel(errOpenedEarly)
			}
		case <-wctx.Done():
		}
	}()
	err := m.waitRunning(wctx, pod)
	if err != nil && errors.Is(context.Cause(wctx), errOpenedEarly) {
		return nil
	}
	return err
}
