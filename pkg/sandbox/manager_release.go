package sandbox

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/pcsync/pcsync/internal/lib/podwait"
	"github.com/pcsync/pcsync/pkg/sandbox/cmdclient"
	"github.com/pcsync/pcsync/pkg/sandbox/leasepod"
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
// longer has it. Releasing a lease that is already gone is not an error;
// concurrent releases of one lease all wait for the same end.
func (m *Manager) Release(ctx context.Context, p ReleaseParams) (ReceiptState, error) {
	l := m.lookup(p.ID)
	if l == nil {
		if err := m.releaseUnknown(ctx, p); err != nil {
			return "", err
		}
		return ReceiptDestroyed, nil
	}
	why := EndCancelled
	if !p.Cancel {
		why = EndDrained
		if idle := l.drain(); idle != nil {
			select {
			case <-idle:
			case <-l.gone: // ended otherwise meanwhile (its expiry)
			case <-ctx.Done():
				return "", fmt.Errorf("lease %s: waiting for its commands: %w", l.ID, ctx.Err())
			}
		}
	}
	m.releaseAsync(l, why)
	select {
	case <-l.gone:
	case <-ctx.Done():
		return "", fmt.Errorf("lease %s: waiting for its end: %w", l.ID, ctx.Err())
	}
	if err := l.endErr(); err != nil {
		return "", fmt.Errorf("lease %s: %w", l.ID, err)
	}
	return ReceiptDestroyed, nil
}

// releaseUnknown releases a lease the daemon does not hold (any more): it
// makes sure no pod of that name is left in the namespace Paperclip
// recorded.
func (m *Manager) releaseUnknown(ctx context.Context, p ReleaseParams) error {
	if p.Namespace == "" {
		return nil
	}
	pod, err := m.cs.CoreV1().Pods(p.Namespace).Get(ctx, p.ID, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return fmt.Errorf("Pod/%s/%s: %w", p.Namespace, p.ID, err)
	case pod.Labels[leasepod.LabelLease] != p.ID:
		return nil
	}
	if err := m.deletePod(ctx, p.Namespace, p.ID, string(pod.UID)); err != nil {
		return err
	}
	return m.waitGone(ctx, p.Namespace, p.ID)
}

// CancelRun ends at once every lease acquired for Paperclip's run runID
// (its commands killed, its pods deleted and gone) and returns how many it
// ended. Paperclip marks a cancelled run cancelled but lets a sandbox's
// running command go on; the plugin forwards the run's cancel event here.
func (m *Manager) CancelRun(ctx context.Context, runID string) (int, error) {
	if e := m.early.take(runID); e != nil {
		m.dropEarly(e, "its run was cancelled")
	}
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
// wait until it is gone, delete a kept lease's claim, drop it from the
// journal. Later calls only wait
// on the same end.
func (m *Manager) releaseAsync(l *lease, why EndReason) {
	c, ok := l.end()
	if !ok {
		return
	}
	if l.expiry != nil {
		l.expiry.Stop()
	}
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		begin := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), m.opts.DeleteTimeout)
		defer cancel()
		l.mu.Lock()
		suspended, uid := l.Suspended, l.PodUID
		l.mu.Unlock()
		if !suspended {
			m.stopServer(ctx, l, c)
		}
		err := m.deletePod(ctx, l.Namespace, l.ID, uid)
		if err == nil {
			err = m.waitGone(ctx, l.Namespace, l.ID)
		}
		if err == nil && l.Keep != nil {
			err = m.deleteClaim(ctx, l.Namespace, l.ID, "")
		}
		m.countSuspended(l, false)
		if err == nil {
			if jerr := m.j.drop(l.ID); jerr != nil {
				m.log.Warn("sandbox: lease journal", slog.Any("error", jerr))
			}
			m.forget(l.ID)
		}
		l.finish(err)
		m.unhold(l)
		m.opts.Metrics.SandboxRelease(string(why))
		m.log.Info("sandbox lease ended", slog.String("lease", l.ID), slog.String("why", string(why)),
			slog.Duration("took", time.Since(begin).Round(time.Millisecond)), slog.Any("error", err))
	}()
}

// stopServer stops the lease's command server, which kills every process
// group it started: through the lease's stream c, or, where pods share the
// host (the server outlives the pod) and the daemon holds no stream, through
// a fresh one.
func (m *Manager) stopServer(ctx context.Context, l *lease, c *cmdclient.Client) {
	sctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if c == nil {
		if m.opts.HostRoot == "" {
			return
		}
		var err error
		if c, err = m.open(sctx, l); err != nil {
			return
		}
	}
	if err := c.Shutdown(sctx); err != nil {
		m.log.Debug("sandbox: command server shutdown", slog.String("lease", l.ID), slog.Any("error", err))
	}
	_ = c.Close()
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
	return fmt.Errorf("Pod/%s/%s: delete: %w", ns, name, err)
}

// waitGone returns once the API server no longer has the pod.
func (m *Manager) waitGone(ctx context.Context, ns, name string) error {
	if err := podwait.Gone(ctx, m.cs, ns, name); err != nil {
		return fmt.Errorf("%w (the delete's wait is %s)", err, m.opts.DeleteTimeout)
	}
	return nil
}
