package sandbox

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/pcsync/pcsync/internal/lib/agentpod"
	"github.com/pcsync/pcsync/pkg/config"
	"github.com/pcsync/pcsync/pkg/sandbox/leasepod"
	"github.com/pcsync/pcsync/pkg/sandbox/pool"
)

// errClaimGone marks a resume refused because the lease's claim is gone.
var errClaimGone = errors.New("its claim is gone")

// keepOf is the storage a lease of company c asked for with core (the
// environment's Paperclip fields) keeps its workspace on: the company's
// spec.sandbox.suspend for a kept lease (reuseLease and
// runnerLifecycleMode warm), else nil.
func keepOf(c *config.Company, core map[string]any) *leasepod.Keep {
	s := c.LeaseSuspend()
	if s == nil || core["reuseLease"] != true || core["runnerLifecycleMode"] != "warm" {
		return nil
	}
	return &leasepod.Keep{IdleSec: s.IdleSec, Size: string(s.Size), StorageClassName: s.StorageClassName}
}

// owner is the deployment of pcsync whose claims this daemon keeps.
func (m *Manager) owner() string { return cmp.Or(m.opts.Pool.Owner, pool.DefaultOptions().Owner) }

// createClaim creates kept lease r's claim (create-if-absent: one of the
// lease's own is taken). A full quota is refused with its code.
func (m *Manager) createClaim(ctx context.Context, model *config.Model, r *leasepod.Record) error {
	c, ok := model.Company(r.Company)
	if !ok {
		return fmt.Errorf("PersistentVolumeClaim/%s/%s: no Company %q in the config", r.Namespace, r.ID, r.Company)
	}
	pvc, err := leasepod.BuildClaim(r, c, m.owner())
	if err != nil {
		return err
	}
	_, err = m.cs.CoreV1().PersistentVolumeClaims(r.Namespace).Create(ctx, pvc, metav1.CreateOptions{FieldManager: "pcsync"})
	switch {
	case err == nil:
		return nil
	case apierrors.IsAlreadyExists(err):
		old, gerr := m.cs.CoreV1().PersistentVolumeClaims(r.Namespace).Get(ctx, r.ID, metav1.GetOptions{})
		if gerr == nil && old.Labels[leasepod.LabelLease] == r.ID && old.DeletionTimestamp == nil {
			return nil
		}
	case apierrors.IsForbidden(err) && strings.Contains(err.Error(), "quota"):
		return userErrorf(CodeQuotaFull, "PersistentVolumeClaim/%s/%s: company %s is at its quota of claims or storage (ResourceQuota paperclip-quota): %s; raise spec.quota.persistentVolumeClaims or requestsStorage in Git",
			r.Namespace, r.ID, r.Company, err.Error())
	}
	return fmt.Errorf("PersistentVolumeClaim/%s/%s: create: %w", r.Namespace, r.ID, err)
}

// deleteClaim deletes a kept lease's claim (its UID a precondition when
// known); one already gone is no error.
func (m *Manager) deleteClaim(ctx context.Context, ns, name, uid string) error {
	opts := metav1.DeleteOptions{}
	if uid != "" {
		opts.Preconditions = &metav1.Preconditions{UID: ptr.To(types.UID(uid))}
	}
	err := m.cs.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, name, opts)
	if err == nil || apierrors.IsNotFound(err) || (apierrors.IsConflict(err) && strings.Contains(err.Error(), "UID")) {
		return nil
	}
	return fmt.Errorf("PersistentVolumeClaim/%s/%s: delete: %w", ns, name, err)
}

// claimUsable says whether suspended lease l's claim is there to mount: a
// claim gone or being deleted refuses the resume (errClaimGone, with
// CodeStorageGone).
func (m *Manager) claimUsable(ctx context.Context, l *lease) error {
	pvc, err := m.cs.CoreV1().PersistentVolumeClaims(l.Namespace).Get(ctx, l.ID, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err) || (err == nil && pvc.DeletionTimestamp != nil):
		return &claimGoneError{UserError{Code: CodeStorageGone, Message: fmt.Sprintf(
			"lease %s: PersistentVolumeClaim/%s/%s, which kept its workspace and HOME, is gone: the lease is ended; acquire a fresh one",
			l.ID, l.Namespace, l.ID)}}
	case err != nil:
		return fmt.Errorf("PersistentVolumeClaim/%s/%s: %w", l.Namespace, l.ID, err)
	}
	return nil
}

// claimGoneError is CodeStorageGone's UserError, which is also
// errClaimGone.
type claimGoneError struct{ UserError }

func (e *claimGoneError) Is(target error) bool { return target == errClaimGone }

// Unwrap gives the UserError, for its code.
func (e *claimGoneError) Unwrap() error { return &e.UserError }

// explainStorage adds to why a resumed pod did not start what its claim
// says: still Pending (no volume: its StorageClass, or no default one),
// or bound to a volume of another node.
func (m *Manager) explainStorage(ctx context.Context, err error, r *leasepod.Record) error {
	var ue *UserError
	if !errors.As(err, &ue) {
		return err
	}
	pvc, gerr := m.cs.CoreV1().PersistentVolumeClaims(r.Namespace).Get(ctx, r.ID, metav1.GetOptions{})
	if gerr != nil {
		return err
	}
	class := "the cluster's default StorageClass"
	if pvc.Spec.StorageClassName != nil {
		class = "StorageClass " + *pvc.Spec.StorageClassName
	}
	msg := fmt.Sprintf("%s; PersistentVolumeClaim/%s/%s is %s (%s)", ue.Message, r.Namespace, r.ID, pvc.Status.Phase, class)
	if pvc.Status.Phase == corev1.ClaimBound {
		msg += ", its volume " + pvc.Spec.VolumeName + " bound where the pod may not go"
	}
	if r.Suspended {
		msg += "; the lease stays suspended"
	}
	return &UserError{Code: ue.Code, Message: msg}
}

// ownClaims lists the claims of kept leases that this deployment of
// pcsync keeps, in every namespace.
func (m *Manager) ownClaims(ctx context.Context) ([]corev1.PersistentVolumeClaim, error) {
	list, err := m.cs.CoreV1().PersistentVolumeClaims(metav1.NamespaceAll).List(ctx, metav1.ListOptions{
		LabelSelector: agentpod.LabelManagedBy + "=" + agentpod.ManagedByValue + "," + leasepod.LabelLease + "," +
			leasepod.LabelOwner + "=" + agentpod.LabelValue(m.owner()),
	})
	if err != nil {
		return nil, fmt.Errorf("sandbox: list the kept leases' claims: %w", err)
	}
	return list.Items, nil
}

// journalClaims puts into the journal the leases whose claims it lacks
// (a daemon that lost its state directory): adopt then takes them, as
// suspended when their pod is gone.
func (m *Manager) journalClaims(ctx context.Context) error {
	claims, err := m.ownClaims(ctx)
	if err != nil {
		return err
	}
	known := map[string]bool{}
	for _, r := range m.j.leases() {
		known[r.ID] = true
	}
	for i := range claims {
		pvc := &claims[i]
		if known[pvc.Name] || pvc.DeletionTimestamp != nil {
			continue
		}
		r, err := leasepod.ClaimRecord(pvc)
		if err != nil {
			m.log.Warn("sandbox: a claim of no journal whose record does not read", slog.Any("error", err))
			continue
		}
		m.log.Info("sandbox lease rebuilt from its claim", slog.String("lease", r.ID), slog.String("namespace", r.Namespace))
		if err := m.j.put(r); err != nil {
			return err
		}
	}
	return nil
}

// sweepClaims deletes this deployment's claims whose lease the daemon
// does not hold (or whose end failed), once older than Options.ClaimGrace:
// a lease's claim is made before it is tracked, and a lease ended without
// its claim's delete leaves it.
func (m *Manager) sweepClaims(ctx context.Context) {
	claims, err := m.ownClaims(ctx)
	if err != nil {
		m.log.Warn("sandbox: orphaned claims not swept", slog.Any("error", err))
		return
	}
	for i := range claims {
		pvc := &claims[i]
		if pvc.DeletionTimestamp != nil || time.Since(pvc.CreationTimestamp.Time) < m.opts.ClaimGrace {
			continue
		}
		if l := m.lookup(pvc.Name); l != nil && l.Namespace == pvc.Namespace && l.State() != LeaseGone {
			continue
		}
		m.log.Info("sandbox: deleting a claim whose lease is gone", slog.String("claim", pvc.Namespace+"/"+pvc.Name))
		if err := m.deleteClaim(ctx, pvc.Namespace, pvc.Name, string(pvc.UID)); err != nil {
			m.log.Warn("sandbox: orphaned claim", slog.Any("error", err))
		}
	}
	m.endClaimless(ctx, claims)
}

// endClaimless ends the suspended leases whose claim is gone or being
// deleted (their tenant pruned, its namespace deleted): the journal
// forgets them, as a resume would when it found the claim gone. A lease
// whose claim is not among claims is looked up by name first (its claim
// may carry another owner's label).
func (m *Manager) endClaimless(ctx context.Context, claims []corev1.PersistentVolumeClaim) {
	listed := map[string]bool{}
	for i := range claims {
		if claims[i].DeletionTimestamp == nil {
			listed[claims[i].Namespace+"/"+claims[i].Name] = true
		}
	}
	for _, l := range m.held() {
		if l.Keep == nil || l.State() != LeaseSuspended || listed[l.Namespace+"/"+l.ID] {
			continue
		}
		if err := m.claimUsable(ctx, l); !errors.Is(err, errClaimGone) {
			continue
		}
		m.log.Info("sandbox: ending a suspended lease whose claim is gone", slog.String("lease", l.ID), slog.String("namespace", l.Namespace))
		m.releaseAsync(l, EndFailed)
	}
}
