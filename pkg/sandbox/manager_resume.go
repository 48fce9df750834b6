package sandbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pcsync/pcsync/pkg/config"
	"github.com/pcsync/pcsync/pkg/sandbox/leasepod"
)

// resume gives suspended lease l a pod again, on its claim, with today's
// placement, helper image and credentials' check; one caller resumes, the
// others wait for it (ensureReady). A pod that does not start is deleted
// and the lease stays suspended, with the reason; a lease whose claim is
// gone is ended (Paperclip acquires a fresh one).
func (m *Manager) resume(ctx context.Context, l *lease) error {
	if !l.to(LeaseSuspended, LeaseResuming) {
		return nil // another caller resumes it, or it ended
	}
	m.step(stepResumeBegun)
	began := time.Now()
	err := m.startAgain(ctx, l)
	outcome := SuspendDone
	if err != nil {
		outcome = SuspendFailed
		m.log.Warn("sandbox lease not resumed", slog.String("lease", l.ID), slog.Any("error", err))
	} else {
		m.countSuspended(l, false)
		m.log.Info("sandbox lease resumed on its claim", slog.String("lease", l.ID),
			slog.Duration("took", time.Since(began).Round(time.Millisecond)))
	}
	m.opts.Metrics.SandboxResume(l.Company, time.Since(began), string(outcome))
	return err
}

// startAgain is resume's work on a resuming lease: its claim checked, its
// pod created (or the one a daemon before this one created taken) and
// waited for, its journal entry updated, its stream opened.
func (m *Manager) startAgain(ctx context.Context, l *lease) error {
	model := m.model()
	if model == nil {
		l.to(LeaseResuming, LeaseSuspended)
		return userErrorf(CodeNoConfig, "pcsync has no valid config loaded yet")
	}
	if err := m.claimUsable(ctx, l); err != nil {
		if errors.Is(err, errClaimGone) {
			m.releaseAsync(l, EndFailed)
		} else {
			l.to(LeaseResuming, LeaseSuspended)
		}
		return err
	}
	l.mu.Lock()
	r := l.Record
	l.mu.Unlock()
	r.Server, r.HelperImage = "", ""
	m.placeServer(&r, model)
	if err := m.credentialsExist(ctx, model, &r); err != nil {
		l.to(LeaseResuming, LeaseSuspended)
		return err
	}
	pod, err := m.podAgain(ctx, model, &r)
	if err != nil {
		l.to(LeaseResuming, LeaseSuspended)
		return err
	}
	m.step(stepResumeCreated)
	patience := m.opts.ReadyTimeout
	ws := m.openEarly(r, patience)
	rctx, cancel := context.WithTimeout(ctx, patience)
	defer cancel()
	if err := m.waitStarted(rctx, pod, ws); err != nil {
		ws.close()
		m.unstart(l, r.PodUID)
		return m.explainStorage(ctx, explainUnschedulable(err, model, &r), &r)
	}
	r.Suspended = false
	l.mu.Lock()
	l.PodUID, l.Suspended, l.Server, l.HelperImage = r.PodUID, false, r.Server, r.HelperImage
	// What the last pod held of the lease's credentials (the token's hash
	// on it, codex's config in it) is made again for the new pod.
	l.token, l.codexConfig = "", false
	l.resumed = resumedNotice(l)
	l.mu.Unlock()
	m.step(stepResumeStarted)
	if err := m.j.put(r); err != nil {
		m.log.Warn("sandbox: lease journal", slog.Any("error", err))
	}
	if !l.to(LeaseResuming, LeaseReady) {
		ws.close()
		return fmt.Errorf("lease %s: state %s: it ended while its pod started", l.ID, l.State())
	}
	m.connect(l, patience, ws)
	if proxied, cold := m.proxyState(model, r.Company, r.Namespace); cold || proxied {
		if err := m.waitProxy(ctx, l, !cold); err != nil {
			return err
		}
	}
	return nil
}

// resumedNotice is what the first execute after lease l's resume tells
// the run (ExecStreams.Notice): its claim kept the workspace and HOME, for
// how long, after what idle time. l.mu is held.
func resumedNotice(l *lease) string {
	held := ""
	if !l.suspendedAt.IsZero() {
		held = " for " + time.Since(l.suspendedAt).Round(time.Second).String()
	}
	return fmt.Sprintf("[pcsync] lease %s resumed: its workspace and HOME were kept on claim %s while suspended%s (suspended after %s idle)\n",
		l.ID, l.ID, held, time.Duration(l.Keep.IdleSec)*time.Second)
}

// MetadataResumed is the key, in the metadata of a lease resumeLease got
// back from suspension, of what its suspension was (resumedMetadata):
// Paperclip keeps it on the run's own lease record, beside its
// sandboxLeaseAcquisition outcome "resumed".
const MetadataResumed = "resumedFromSuspension"

// resumedMetadata says of lease l, back from suspension, the claim that
// kept its workspace and HOME, when it was suspended, for how long, and
// after what idle time.
func resumedMetadata(l *lease) map[string]any {
	l.mu.Lock()
	defer l.mu.Unlock()
	md := map[string]any{"claim": l.ID}
	if l.Keep != nil {
		md["idleSec"] = l.Keep.IdleSec
	}
	if !l.suspendedAt.IsZero() {
		md["suspendedAt"] = l.suspendedAt.UTC().Format(time.RFC3339)
		md["suspendedSec"] = int64(time.Since(l.suspendedAt).Seconds())
	}
	return md
}

// podAgain creates a resuming lease's pod under its name, which no other
// pod may hold (the API server's create is create-if-absent): a pod of the
// lease still being deleted is waited gone first, and a running one of
// the lease (a daemon before this one resumed it) is taken. r gets its
// UID.
func (m *Manager) podAgain(ctx context.Context, model *config.Model, r *leasepod.Record) (*corev1.Pod, error) {
	pod, err := leasepod.BuildPod(r, model)
	if err != nil {
		return nil, err
	}
	for range 2 {
		created, err := m.cs.CoreV1().Pods(r.Namespace).Create(ctx, pod, metav1.CreateOptions{FieldManager: "pcsync"})
		if err == nil {
			r.PodUID = string(created.UID)
			return created, nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return nil, createError(*r, err)
		}
		old, gerr := m.cs.CoreV1().Pods(r.Namespace).Get(ctx, r.ID, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(gerr):
			continue
		case gerr != nil:
			return nil, fmt.Errorf("Pod/%s/%s: %w", r.Namespace, r.ID, gerr)
		case old.Labels[leasepod.LabelLease] != r.ID:
			return nil, fmt.Errorf("Pod/%s/%s: a pod of that name is not the lease's", r.Namespace, r.ID)
		case old.DeletionTimestamp == nil:
			r.PodUID = string(old.UID)
			return old, nil
		}
		if err := m.waitGone(ctx, r.Namespace, r.ID); err != nil {
			return nil, err
		}
	}
	return nil, fmt.Errorf("Pod/%s/%s: still there after its delete", r.Namespace, r.ID)
}

// unstart deletes the pod of a resume that failed and puts the lease back
// to suspended once it is gone (ended when it is not).
func (m *Manager) unstart(l *lease, uid string) {
	ctx, cancel := context.WithTimeout(m.base(), m.opts.DeleteTimeout)
	defer cancel()
	err := m.deletePod(ctx, l.Namespace, l.ID, uid)
	if err == nil {
		err = m.waitGone(ctx, l.Namespace, l.ID)
	}
	if err != nil {
		m.log.Warn("sandbox: the pod of a failed resume", slog.String("lease", l.ID), slog.Any("error", err))
		m.releaseAsync(l, EndFailed)
		return
	}
	l.to(LeaseResuming, LeaseSuspended)
}
