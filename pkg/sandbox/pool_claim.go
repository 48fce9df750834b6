package sandbox

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/pcsync/pcsync/internal/agentpod"
	"github.com/pcsync/pcsync/internal/podwait"
	"github.com/pcsync/pcsync/internal/tenantns"
	"github.com/pcsync/pcsync/pkg/config"
)

// startPod gives lease r its pod: a Ready member of a warm pool whose pods
// are r's (claim), else a new one (createPod). When the quota has no room
// for the new one, the namespace's pools shrink, one member at a time,
// before the lease is refused. warm says the pod was a member: it runs
// already.
func (m *Manager) startPod(ctx context.Context, model *config.Model, r *Record) (pod *corev1.Pod, warm bool, err error) {
	outcome := ClaimCold
	defer func() {
		if err == nil {
			m.opts.Metrics.SandboxPoolClaim(r.Company, string(outcome))
		}
	}()
	if p := m.pools; p != nil {
		k, declared := p.keyOf(r, model)
		if declared {
			outcome = ClaimMiss
			if pod, err := m.claim(ctx, model, r, k); err != nil || pod != nil {
				outcome = ClaimWarm
				return pod, true, err
			}
		}
	}
	pod, err = m.createPod(ctx, model, r)
	if m.pools == nil {
		return pod, false, err
	}
	deadline := time.Now().Add(m.opts.Pool.RoomWait)
	for quotaFull(err) && m.pools.shrink(ctx, r.Namespace) {
		// The quota's usage drops once its controller has seen the
		// member gone: retry until then.
		for quotaFull(err) && time.Now().Before(deadline) && ctx.Err() == nil {
			time.Sleep(200 * time.Millisecond)
			pod, err = m.createPod(ctx, model, r)
		}
	}
	return pod, false, err
}

// quotaFull says err is a create refused by the namespace's quota.
func quotaFull(err error) bool {
	var ue *UserError
	return errors.As(err, &ue) && ue.Code == CodeQuotaFull
}

// keyOf is the pool whose members lease r would claim, and whether the
// config declares it.
func (p *warmPools) keyOf(r *Record, model *config.Model) (poolKey, bool) {
	hash, err := specHash(*r, model, p.m.opts.HostRoot)
	if err != nil {
		return poolKey{}, false
	}
	k := poolKey{Namespace: r.Namespace, Hash: hash}
	p.mu.Lock()
	defer p.mu.Unlock()
	_, ok := p.declared[k]
	return k, ok
}

// claim takes a Ready member of pool k for lease r and makes it the
// lease's pod; nil when no member could be had. The lease takes the
// member's name (its id) and UID, and joins the journal before the claim's
// patch; a claim that loses a race (the member changed or is gone) tries
// the next member. The pool refills at once.
func (m *Manager) claim(ctx context.Context, model *config.Model, r *Record, k poolKey) (*corev1.Pod, error) {
	p := m.pools
	defer p.poke()
	for {
		mem := p.take(k)
		if mem == nil {
			return nil, nil
		}
		pod, err := m.claimMember(ctx, model, r, mem)
		if err == nil {
			return pod, nil
		}
		p.untake(mem.Name)
		var ue *UserError
		if errors.As(err, &ue) || ctx.Err() != nil {
			return nil, err
		}
		m.log.Info("sandbox: warm pool member not claimed; trying the next", slog.String("pod", mem.Namespace+"/"+mem.Name), slog.Any("error", err))
	}
}

// claimMember makes member mem lease r's pod with one merge patch whose
// resourceVersion and UID are preconditions: the lease's labels (its role
// among them: the company's egress policy selects it from now on) and
// annotations, the member's pool label removed, and activeDeadlineSeconds
// lowered to the lease's expiry.
func (m *Manager) claimMember(ctx context.Context, model *config.Model, r *Record, mem *corev1.Pod) (*corev1.Pod, error) {
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
	lease.setPaths(m.opts.HostRoot)
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
			"labels":          claimLabels(&lease, c),
			"annotations":     podAnnotations(&lease),
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

// take marks the oldest Ready member of pool k as taken and returns it;
// nil when none is Ready.
func (p *warmPools) take(k poolKey) *corev1.Pod {
	objs, _ := p.inf.GetIndexer().ByIndex(poolIndex, k.String())
	pods := make([]*corev1.Pod, 0, len(objs))
	for _, o := range objs {
		if pod := o.(*corev1.Pod); agentpod.Ready(pod) {
			pods = append(pods, pod)
		}
	}
	slices.SortFunc(pods, func(a, b *corev1.Pod) int {
		return cmp.Or(a.CreationTimestamp.Compare(b.CreationTimestamp.Time), cmp.Compare(a.Name, b.Name))
	})
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, pod := range pods {
		if !p.taken[pod.Name] {
			p.taken[pod.Name] = true
			return pod.DeepCopy()
		}
	}
	return nil
}

// untake gives a member back to its pool after a claim that failed.
func (p *warmPools) untake(name string) {
	p.mu.Lock()
	delete(p.taken, name)
	p.mu.Unlock()
}

// shrink deletes one member of namespace ns (one that is not Ready
// first) for a lease that needs its room in the quota, holds the
// namespace's refills for QuotaBackoff, and returns once the member is
// gone; false when ns has no member left.
func (p *warmPools) shrink(ctx context.Context, ns string) bool {
	objs, _ := p.inf.GetIndexer().ByIndex(cache.NamespaceIndex, ns)
	var pick *corev1.Pod
	p.mu.Lock()
	p.pressure[ns] = time.Now().Add(p.m.opts.Pool.QuotaBackoff)
	for _, o := range objs {
		pod := o.(*corev1.Pod)
		if p.taken[pod.Name] || pod.DeletionTimestamp != nil {
			continue
		}
		if pick == nil || (agentpod.Ready(pick) && !agentpod.Ready(pod)) {
			pick = pod
		}
	}
	if pick != nil {
		p.taken[pick.Name] = true
	}
	p.mu.Unlock()
	if pick == nil {
		return false
	}
	p.m.log.Info("sandbox: warm pool shrunk for a lease the quota has no room for", slog.String("pod", ns+"/"+pick.Name))
	err := p.m.deletePod(ctx, ns, pick.Name, string(pick.UID))
	if err == nil {
		err = podwait.Gone(ctx, p.m.cs, ns, pick.Name)
	}
	if err != nil && !apierrors.IsNotFound(err) {
		p.m.log.Warn("sandbox: warm pool member not deleted for room", slog.String("pod", ns+"/"+pick.Name), slog.Any("error", err))
	}
	return true
}

// isClosed says Close has begun.
func (m *Manager) isClosed() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.closed
}
