package sandbox

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
)

// ReceiptState is the state a termination receipt reports.
type ReceiptState string

// ReceiptDestroyed: the lease's pod is deleted and gone, every command of
// it ended.
const ReceiptDestroyed ReceiptState = "destroyed"

// ReleaseParams say which lease to end and how.
type ReleaseParams struct {
	ID string
	// Cancel ends the running commands at once instead of letting them
	// finish.
	Cancel bool
	// Namespace is the lease's namespace as Paperclip recorded it, for a
	// lease this daemon does not hold (its journal was lost).
	Namespace string
}

// Release ends a lease and returns only once its pod is gone: without
// Cancel it first waits for the executes in flight (up to the lease's
// expiry); then it stops the command server (which kills every process
// group it started), deletes the pod and waits until the API server no
// longer has it. Releasing a lease that is already gone is not an error.
func (m *Manager) Release(ctx context.Context, p ReleaseParams) (ReceiptState, error) {
	l := m.lookup(p.ID)
	if l == nil {
		// Not ours (any more): make sure no pod of that name is left.
		if p.Namespace != "" {
			pod, err := m.cs.CoreV1().Pods(p.Namespace).Get(ctx, p.ID, metav1.GetOptions{})
			switch {
			case apierrors.IsNotFound(err):
			case err != nil:
				return "", fmt.Errorf("Pod/%s/%s: %w", p.Namespace, p.ID, err)
			case pod.Labels[LabelLease] == p.ID:
				if err := m.deletePod(ctx, p.Namespace, p.ID, string(pod.UID)); err != nil {
					return "", err
				}
				if err := m.waitGone(ctx, p.Namespace, p.ID); err != nil {
					return "", err
				}
			}
		}
		return ReceiptDestroyed, nil
	}
	if !p.Cancel {
		l.mu.Lock()
		l.state = LeaseReleasing
		var idle chan struct{}
		if l.running > 0 {
			idle = make(chan struct{})
			l.idle = idle
		}
		l.mu.Unlock()
		if idle != nil {
			select {
			case <-idle:
			case <-time.After(time.Until(l.ExpiresAt)):
			case <-ctx.Done():
				return "", ctx.Err()
			}
		}
	}
	m.releaseAsync(l, map[bool]EndReason{true: EndCancelled, false: EndDrained}[p.Cancel])
	select {
	case <-l.released:
	case <-ctx.Done():
		return "", ctx.Err()
	}
	l.mu.Lock()
	errMsg := l.endErr
	l.mu.Unlock()
	if errMsg != "" {
		return "", fmt.Errorf("lease %s: %s", l.ID, errMsg)
	}
	return ReceiptDestroyed, nil
}

// CancelRun ends at once every lease acquired for Paperclip's run runID
// (its commands killed, its pods deleted and gone) and returns how many it
// ended. Paperclip marks a cancelled run cancelled but lets a sandbox's
// running command go on; the plugin forwards the run's cancel event here.
func (m *Manager) CancelRun(ctx context.Context, runID string) (int, error) {
	m.mu.Lock()
	var ids []string
	for id, l := range m.leases {
		if runID != "" && l.RunID == runID {
			ids = append(ids, id)
		}
	}
	m.mu.Unlock()
	for _, id := range ids {
		m.log.Info("sandbox lease cancelled with its run", slog.String("lease", id), slog.String("run", runID))
		if _, err := m.Release(ctx, ReleaseParams{ID: id, Cancel: true}); err != nil {
			return 0, err
		}
	}
	return len(ids), nil
}

// releaseAsync ends a lease once: stop its command server, delete its pod,
// wait until it is gone, drop it from the journal. Later calls only wait
// on the same end.
func (m *Manager) releaseAsync(l *lease, why EndReason) {
	l.mu.Lock()
	if l.ending {
		l.mu.Unlock()
		return
	}
	l.ending = true
	l.state = LeaseReleasing
	c := l.client
	l.client = nil
	l.mu.Unlock()
	if l.expiry != nil {
		l.expiry.Stop()
	}
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		begin := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), m.opts.DeleteTimeout)
		defer cancel()
		if c != nil {
			sctx, scancel := context.WithTimeout(ctx, 3*time.Second)
			if err := c.Shutdown(sctx); err != nil {
				m.log.Debug("sandbox: command server shutdown", slog.String("lease", l.ID), slog.Any("error", err))
			}
			scancel()
			_ = c.Close()
		} else if m.opts.HostRoot != "" {
			// Pods that share the host: the server outlives the pod, so
			// stop it through a fresh stream.
			m.shutdownServer(ctx, l)
		}
		var errMsg string
		if err := m.deletePod(ctx, l.Namespace, l.ID, l.PodUID); err != nil {
			errMsg = err.Error()
		} else if err := m.waitGone(ctx, l.Namespace, l.ID); err != nil {
			errMsg = err.Error()
		}
		if errMsg == "" {
			if err := m.j.drop(l.ID); err != nil {
				m.log.Warn("sandbox: lease journal", slog.Any("error", err))
			}
			m.forget(l.ID)
		}
		l.mu.Lock()
		l.state = LeaseGone
		l.endErr = errMsg
		l.mu.Unlock()
		close(l.released)
		m.unhold(l)
		m.opts.Metrics.SandboxRelease(string(why))
		m.log.Info("sandbox lease ended", slog.String("lease", l.ID), slog.String("why", string(why)),
			slog.Duration("took", time.Since(begin).Round(time.Millisecond)), slog.String("error", errMsg))
	}()
}

// shutdownServer stops a command server the daemon holds no stream to.
func (m *Manager) shutdownServer(ctx context.Context, l *lease) {
	sctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	l.mu.Lock()
	l.shuttingDown = true
	l.mu.Unlock()
	c, err := m.client(sctx, l)
	if err != nil {
		return
	}
	_ = c.Shutdown(sctx)
	_ = c.Close()
	l.mu.Lock()
	l.client = nil
	l.mu.Unlock()
}

// deletePod deletes the lease pod (guarded by its UID when known) with a
// short grace: its commands are already stopped.
func (m *Manager) deletePod(ctx context.Context, ns, name, uid string) error {
	opts := metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(1))}
	if uid != "" {
		opts.Preconditions = &metav1.Preconditions{UID: ptr.To(types.UID(uid))}
	}
	err := m.cs.CoreV1().Pods(ns).Delete(ctx, name, opts)
	switch {
	case err == nil, apierrors.IsNotFound(err):
		return nil
	case apierrors.IsConflict(err) && strings.Contains(err.Error(), "UID"):
		return nil // another pod of that name: ours is gone
	}
	return fmt.Errorf("Pod/%s/%s delete failed: %w", ns, name, err)
}

// waitGone returns once the API server no longer has the pod.
func (m *Manager) waitGone(ctx context.Context, ns, name string) error {
	for {
		pod, err := m.cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("Pod/%s/%s: %w", ns, name, err)
		}
		w, err := m.cs.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{
			FieldSelector:   fields.OneTermEqualSelector("metadata.name", name).String(),
			ResourceVersion: pod.ResourceVersion,
		})
		if err != nil {
			return fmt.Errorf("Pod/%s/%s: watch: %w", ns, name, err)
		}
		gone := false
		for ev := range w.ResultChan() {
			if ev.Type == watch.Deleted {
				gone = true
				break
			}
		}
		w.Stop()
		if gone {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("Pod/%s/%s still there after %s: %w", ns, name, m.opts.DeleteTimeout, ctx.Err())
		}
	}
}
