package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/pcsync/pcsync/pkg/config"
	"github.com/pcsync/pcsync/pkg/sandbox/leasepod"
	"github.com/pcsync/pcsync/pkg/sandbox/pool"
	"github.com/pcsync/pcsync/pkg/tenantns"
)

// startPod gives lease r its pod: a Ready member of a warm pool whose pods
// are r's (claim), else a new one (createPod). When the quota has no room
// for the new one, the namespace's pools shrink, one member at a time,
// before the lease is refused. warm says the pod was a member: it runs
// already, and ws is the stream the daemon opened to it (nil: none).
func (m *Manager) startPod(ctx context.Context, model *config.Model, r *leasepod.Record) (pod *corev1.Pod, ws *warmStream, warm bool, err error) {
	outcome := ClaimCold
	defer func() {
		if err == nil {
			m.opts.Metrics.SandboxPoolClaim(r.Company, string(outcome))
		}
	}()
	if m.pools != nil && r.Keep == nil { // a kept lease's pod mounts its claim: no member does
		k, declared := m.pools.KeyOf(r, model)
		if declared {
			outcome = ClaimMiss
			if pod, ws, err := m.claim(ctx, model, r, k); err != nil || pod != nil {
				outcome = ClaimWarm
				return pod, ws, true, err
			}
		}
	}
	pod, err = m.createPod(ctx, model, r)
	if m.pools == nil {
		return pod, nil, false, err
	}
	if quotaFull(err) {
		m.pools.MakeRoom(ctx, r.Namespace, func() bool {
			pod, err = m.createPod(ctx, model, r)
			return quotaFull(err)
		})
	}
	return pod, nil, false, err
}

// quotaFull says err is a create refused by the namespace's quota.
func quotaFull(err error) bool {
	var ue *UserError
	return errors.As(err, &ue) && ue.Code == CodeQuotaFull
}

// claim takes a Ready member of pool k for lease r and makes it the
// lease's pod; nil when no member could be had. The lease takes the
// member's name (its id) and UID, and joins the journal before the claim's
// patch; a claim that loses a race (the member changed or is gone) tries
// the next member. No lock is held: a member is marked taken by its UID
// (pool.Controller.Take), and the patch's preconditions make the claim
// safe against another process. The informer's event of the claimed
// member (it leaves the pool) refills the pool, once the company's refill
// delay is over. The claim takes the member's stream, if the daemon opened
// one (warm_stream.go).
func (m *Manager) claim(ctx context.Context, model *config.Model, r *leasepod.Record, k pool.Key) (*corev1.Pod, *warmStream, error) {
	p := m.pools
	tried := map[types.UID]bool{}
	for {
		mem := p.Take(k, tried)
		if mem == nil {
			return nil, nil, nil
		}
		ws := m.takeStream(mem.UID)
		pod, err := m.claimMember(ctx, model, r, mem)
		if err == nil {
			return pod, ws, nil
		}
		ws.close()
		p.Untake(mem.UID)
		tried[mem.UID] = true
		var ue *UserError
		if errors.As(err, &ue) || ctx.Err() != nil {
			return nil, nil, err
		}
		m.log.Info("sandbox: warm pool member not claimed; trying the next", slog.String("pod", mem.Namespace+"/"+mem.Name), slog.Any("error", err))
	}
}

// claimMember makes member mem lease r's pod with one merge patch whose
// resourceVersion and UID are preconditions: the lease's labels (its role
// among them: the company's egress policy selects it from now on) and
// annotations, the member's pool label removed, and activeDeadlineSeconds
// lowered to the lease's expiry.
func (m *Manager) claimMember(ctx context.Context, model *config.Model, r *leasepod.Record, mem *corev1.Pod) (*corev1.Pod, error) {
	if err := m.tenants.Check(ctx, r.Namespace, r.Company); errors.Is(err, tenantns.ErrNotTenant) {
		return nil, userErrorf(CodeNamespaceNotTenant, "no pod claimed: %v", err)
	} else if err != nil {
		return nil, err
	}
	c, ok := model.Company(r.Company)
	if !ok {
		return nil, fmt.Errorf("Pod/%s/%s: no Company %q in the config", mem.Namespace, mem.Name, r.Company)
	}
	lease := *r
	lease.ID, lease.PodUID = mem.Name, string(mem.UID)
	lease.SetPaths(m.opts.HostRoot)
	started := mem.CreationTimestamp.Time
	if st := mem.Status.StartTime; st != nil {
		started = st.Time
	}
	deadline := int64(math.Ceil(time.Until(lease.ExpiresAt).Seconds() + time.Since(started).Seconds()))
	if d := mem.Spec.ActiveDeadlineSeconds; d != nil && deadline > *d {
		return nil, fmt.Errorf("Pod/%s/%s: too old for the lease (deadline %ds, the lease needs %ds)", mem.Namespace, mem.Name, *d, deadline)
	}
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{
			"resourceVersion": mem.ResourceVersion,
			"uid":             mem.UID,
			"labels":          pool.ClaimLabels(&lease, c),
			"annotations":     leasepod.Annotations(&lease),
		},
		"spec": map[string]any{"activeDeadlineSeconds": deadline},
	})
	if err != nil {
		return nil, err
	}
	if m.isClosed() {
		return nil, errors.New("sandbox: the daemon is stopping")
	}
	if err := m.j.put(lease); err != nil {
		return nil, err
	}
	pod, err := m.cs.CoreV1().Pods(mem.Namespace).Patch(ctx, mem.Name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "pcsync"})
	if err != nil {
		_ = m.j.drop(lease.ID)
		return nil, fmt.Errorf("Pod/%s/%s: claim: %w", mem.Namespace, mem.Name, err)
	}
	*r = lease
	return pod, nil
}

// isClosed says Close has begun.
func (m *Manager) isClosed() bool { return m.closing.Load() }
