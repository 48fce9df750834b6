package sandbox

import (
	"cmp"
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/pcsync/pcsync/internal/agentpod"
)

// PoolStatus is one warm pool against its declaration, as the daemon's
// cache has it.
type PoolStatus struct {
	// Company is the company slug; Namespace its tenant namespace.
	Company   string
	Namespace string
	// Image and Agent are what the pool declares (Agent empty: the
	// company's scheduling); both empty for members of a pool no longer
	// declared, which are being drained.
	Image string
	Agent string
	// Hash is the members' spec hash (their LabelPool value).
	Hash string
	// Declared is the count the config declares (0: draining).
	Declared int
	// Members are the members not being deleted or claimed; Ready those of
	// them a lease may claim.
	Members int
	Ready   int
}

// Pools returns each warm pool against its declaration, sorted by
// namespace and image: nil when the daemon keeps no pools.
func (m *Manager) Pools() []PoolStatus {
	if m.pools == nil {
		return nil
	}
	return m.pools.status()
}

func (p *warmPools) status() []PoolStatus {
	p.mu.Lock()
	byKey := map[poolKey]*PoolStatus{}
	for k, d := range p.declared {
		byKey[k] = &PoolStatus{Company: d.rec.Company, Namespace: k.Namespace, Image: d.rec.Image, Agent: d.rec.Agent, Hash: k.Hash, Declared: d.count}
	}
	taken := make(map[string]bool, len(p.taken))
	for n := range p.taken {
		taken[n] = true
	}
	p.mu.Unlock()
	for _, obj := range p.inf.GetStore().List() {
		pod := obj.(*corev1.Pod)
		if taken[pod.Name] || pod.DeletionTimestamp != nil {
			continue
		}
		k := poolKey{Namespace: pod.Namespace, Hash: pod.Labels[LabelPool]}
		s := byKey[k]
		if s == nil {
			s = &PoolStatus{Company: agentpod.CompanyOf(pod.Labels), Namespace: k.Namespace, Hash: k.Hash}
			byKey[k] = s
		}
		s.Members++
		if agentpod.Ready(pod) {
			s.Ready++
		}
	}
	out := make([]PoolStatus, 0, len(byKey))
	for _, s := range byKey {
		out = append(out, *s)
	}
	slices.SortFunc(out, func(a, b PoolStatus) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Image, b.Image), cmp.Compare(a.Hash, b.Hash))
	})
	return out
}

// report gives the metrics each company's pools: declared, members and
// ready summed over its pools, and zeros for a company reported before
// that has none now.
func (p *warmPools) report() {
	sums := map[string][3]int{}
	for _, s := range p.status() {
		v := sums[s.Company]
		sums[s.Company] = [3]int{v[0] + s.Declared, v[1] + s.Members, v[2] + s.Ready}
	}
	for c := range p.reported {
		if _, ok := sums[c]; !ok {
			sums[c] = [3]int{}
			delete(p.reported, c)
		}
	}
	for c, v := range sums {
		if v != [3]int{} {
			p.reported[c] = true
		}
		p.m.opts.Metrics.SandboxPool(c, v[0], v[1], v[2])
	}
}
