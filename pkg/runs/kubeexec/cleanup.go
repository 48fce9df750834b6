package kubeexec

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// Release implements runs.Handle: once the result is written, the run's
// Secret is deleted at once and its finished Job is kept until the
// company's ttlSecondsAfterFinished removes it (with its pod), so that a
// create of the Job that an earlier daemon sent and that reaches the API
// server only now is answered AlreadyExists instead of storing the Job (and
// running the agent) again. A company that retains Jobs keeps its Secret
// too; one whose Jobs have no TTL has its Job deleted at once, as nothing
// else would remove it. The run's journal record ends.
func (h *handle) Release(ctx context.Context) error {
	h.mu.Lock()
	gone := h.jobGone
	h.mu.Unlock()
	var errs []error
	if !gone && !h.retain {
		dctx, cancel := context.WithTimeout(ctx, h.e.opts.DeleteTimeout)
		if err := h.e.deleteSecret(dctx, h.ns, h.name); err != nil {
			errs = append(errs, fmt.Errorf("%w (it goes with its Job)", err))
		}
		if !h.keepJob {
			if err := h.deleteJob(dctx); err != nil {
				errs = append(errs, fmt.Errorf("%w (its ttlSecondsAfterFinished removes it later)", err))
			}
		}
		cancel()
	}
	if err := h.e.journal.end(h.r.Name()); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// deleteSecret deletes the run's Secret ns/name; one that is gone already
// counts as deleted.
func (e *Executor) deleteSecret(ctx context.Context, ns, name string) error {
	err := e.client.CoreV1().Secrets(ns).Delete(ctx, name, metav1.DeleteOptions{})
	if err == nil || isNotFound(err) {
		return nil
	}
	return fmt.Errorf("Secret/%s/%s delete failed: %w", ns, name, err)
}

// deleteJob deletes the Job ns/name with background propagation, only if
// its UID is uid (when uid is set); a Job that is already gone (or replaced
// by another of the same name) counts as deleted.
func (e *Executor) deleteJob(ctx context.Context, ns, name string, uid types.UID) error {
	opts := metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)}
	if uid != "" {
		opts.Preconditions = &metav1.Preconditions{UID: ptr.To(uid)}
	}
	err := e.client.BatchV1().Jobs(ns).Delete(ctx, name, opts)
	if err == nil || isNotFound(err) || isConflict(err) {
		return nil
	}
	return fmt.Errorf("Job/%s/%s delete failed: %w", ns, name, err)
}

// deleteJob deletes the run's Job (see Executor.deleteJob).
func (h *handle) deleteJob(ctx context.Context) error {
	return h.e.deleteJob(ctx, h.ns, h.name, h.uid)
}

func isNotFound(err error) bool { return apierrors.IsNotFound(err) }

func isConflict(err error) bool { return apierrors.IsConflict(err) }

func isAlreadyExists(err error) bool { return apierrors.IsAlreadyExists(err) }
