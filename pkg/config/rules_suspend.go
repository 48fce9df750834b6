package config

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/resource"
)

// KeptLeaseAgents counts company c's agents whose Paperclip environment
// keeps their leases between runs (reuseLease and runnerLifecycleMode
// warm): each holds at least one kept lease, and with spec.sandbox.suspend
// its workspace claim.
func (c *Company) KeptLeaseAgents() int {
	kept := map[string]bool{}
	for _, e := range c.Spec.Paperclip.Environments {
		kept[e.Name] = e.ReuseLease != nil && *e.ReuseLease && e.RunnerLifecycleMode == "warm"
	}
	n := 0
	for _, a := range c.Spec.Agents {
		if kept[a.Paperclip.Environment] {
			n++
		}
	}
	return n
}

// leaseSuspend checks spec.sandbox.suspend against the company's quota:
// its persistentVolumeClaims and requestsStorage, where set, must hold one
// workspace claim for each agent whose environment keeps its leases (at
// least one), beside the sessions claim.
func (k *checker) leaseSuspend(d *document, c *Company) {
	s := c.LeaseSuspend()
	if s == nil {
		return
	}
	at := keys("spec", "sandbox", "suspend")
	size, err := resource.ParseQuantity(string(s.Size))
	if err != nil {
		return // the schema reports a quantity that does not parse
	}
	n := max(c.KeptLeaseAgents(), 1)
	q := k.m.Quota(c)
	claims, storage := int64(n), size.DeepCopy()
	storage.Mul(int64(n))
	if ss := c.Spec.Sessions; ss != nil {
		claims++
		if v, err := resource.ParseQuantity(string(ss.Size)); err == nil {
			storage.Add(v)
		}
	}
	what := fmt.Sprintf("%d kept lease(s) of %s each", n, size.String())
	if c.Spec.Sessions != nil {
		what += " and the sessions claim"
	}
	if q.PersistentVolumeClaims != nil && claims > int64(*q.PersistentVolumeClaims) {
		k.errs.add(d.posIn(at, true), at.String(),
			"%s need persistentVolumeClaims %d, more than the company's quota: %s is %d; raise spec.quota.persistentVolumeClaims",
			what, claims, k.quotaSource(d, c, "persistentVolumeClaims"), *q.PersistentVolumeClaims)
	}
	if q.RequestsStorage == nil {
		return
	}
	limit, err := resource.ParseQuantity(string(*q.RequestsStorage))
	if err == nil && storage.Cmp(limit) > 0 {
		k.errs.add(d.posIn(at, true), at.String(),
			"%s need requestsStorage %s, more than the company's quota: %s is %s; lower spec.sandbox.suspend.size or raise spec.quota.requestsStorage",
			what, storage.String(), k.quotaSource(d, c, "requestsStorage"), limit.String())
	}
}
