package pool

import (
	"cmp"
	"slices"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/pcsync/pcsync/internal/lib/agentpod"
)

// Status is one warm pool against its declaration, as the daemon's
// cache has it.
type Status struct {
	// Company is the company slug; Namespace its tenant namespace.
	Company   string
	Namespace string
	// Image and Agent are what the pool declares (Agent empty: the
	// company's scheduling); both empty for members of a pool no longer
	// declared, which are being drained.
	Image string
	Agent string
	// Hash is the members' spec hash (their Label value).
	Hash string
	// Declared is the count the config declares (0: draining).
	Declared int
	// Members are the members not being deleted or claimed; Ready those of
	// them a lease may claim.
	Members int
	Ready   int
	// Acting says this daemon's pool controller holds its owner's Lease
	// and keeps the pool; Holder is the identity of the controller that
	// does ("" while none is known). A standby claims members for its
	// acquires but creates and deletes none.
	Acting bool
	Holder string
}

// Status returns each warm pool against its declaration, sorted by
// namespace and image.
func (c *Controller) Status() []Status {
	byKey := map[Key]*Status{}
	if cfg := c.cfg.Load(); cfg != nil {
		for k, d := range cfg.pools {
			byKey[k] = &Status{Company: d.Rec.Company, Namespace: k.Namespace, Image: d.Rec.Image, Agent: d.Rec.Agent, Hash: k.Hash, Declared: d.count}
		}
	}
	pods, _ := c.lister.List(labels.Everything())
	for _, pod := range pods {
		if _, taken := c.claimed.Load(pod.UID); taken || pod.DeletionTimestamp != nil || !c.isMember(pod) {
			continue
		}
		k := Key{Namespace: pod.Namespace, Hash: pod.Labels[Label]}
		s := byKey[k]
		if s == nil {
			s = &Status{Company: agentpod.CompanyOf(pod.Labels), Namespace: k.Namespace, Hash: k.Hash}
			byKey[k] = s
		}
		s.Members++
		if agentpod.Ready(pod) {
			s.Ready++
		}
	}
	acting, holder := c.Leadership()
	out := make([]Status, 0, len(byKey))
	for _, s := range byKey {
		s.Acting, s.Holder = acting, holder
		out = append(out, *s)
	}
	slices.SortFunc(out, func(a, b Status) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Image, b.Image), cmp.Compare(a.Hash, b.Hash))
	})
	return out
}
