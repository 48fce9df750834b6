package config

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/resource"
)

// warmPool checks a company's spec.sandbox.warmPool: each pool names an
// image or an adapter type (not both), an allowed image, an agent the
// company declares, no image and agent twice; and every member together
// fits the company's quota, whose field the refusal names.
func (k *checker) warmPool(d *document, c *Company) {
	if c.Spec.Sandbox == nil {
		return
	}
	at := keys("spec", "sandbox", "warmPool")
	seen := map[[2]string]Position{}
	total := 0
	for i, p := range c.Spec.Sandbox.WarmPool {
		pp := at.with(index(i))
		switch {
		case p.Image != "" && p.AdapterType != "":
			k.errs.add(d.posIn(pp.with(key("image")), true), pp.with(key("image")).String(), "set either image or adapterType, not both")
			continue
		case p.Image == "" && p.AdapterType == "":
			k.errs.add(d.posIn(pp, true), pp.String(), "a warm pool needs an image or an adapterType")
			continue
		}
		image := k.m.WarmPoolImage(p)
		if p.Image != "" && !k.m.ImageAllowed(image) {
			k.errs.add(d.posIn(pp.with(key("image")), false), pp.with(key("image")).String(),
				"image %q is not allowed: it is no adapter's image and matches no glob of Settings spec.images.allowList", image)
		}
		if _, ok := c.Agent(p.Agent); p.Agent != "" && !ok {
			k.errs.add(d.posIn(pp.with(key("agent")), false), pp.with(key("agent")).String(),
				"agent %q: company %q declares no such agent", p.Agent, c.Metadata.Name)
		}
		pos := d.posIn(pp, true)
		if first, dup := seen[[2]string{image, p.Agent}]; dup {
			k.errs.add(pos, pp.String(), "a warm pool of image %q for agent %q is declared twice (first at %s)", image, p.Agent, first)
		}
		seen[[2]string{image, p.Agent}] = pos
		total += p.Count
	}
	if total > 0 {
		k.poolQuota(d, c, total)
	}
}

// poolQuota refuses a warm pool of n members that the company's quota
// cannot hold: a member is a pod with the requests and limits of a lease
// pod (Settings spec.defaults.resources, else the LimitRange's defaults).
func (k *checker) poolQuota(d *document, c *Company, n int) {
	q := k.m.Quota(c)
	res := k.m.Settings.Spec.Defaults.Resources
	lr := k.m.LimitRange(c)
	need := []struct {
		field string
		quota *Quantity
		each  *Quantity
	}{
		{"pods", podsQuantity(q.Pods), ptrQuantity("1")},
		{"requestsCpu", q.RequestsCPU, firstQuantity(listCPU(res.Requests), listCPU(lr.DefaultRequest))},
		{"requestsMemory", q.RequestsMemory, firstQuantity(listMemory(res.Requests), listMemory(lr.DefaultRequest))},
		{"limitsCpu", q.LimitsCPU, firstQuantity(listCPU(res.Limits), listCPU(lr.Default))},
		{"limitsMemory", q.LimitsMemory, firstQuantity(listMemory(res.Limits), listMemory(lr.Default))},
		{"limitsEphemeralStorage", q.LimitsEphemeralStorage, firstQuantity(listEphemeral(res.Limits), listEphemeral(lr.Default))},
	}
	at := keys("spec", "sandbox", "warmPool")
	for _, x := range need {
		if x.quota == nil || x.each == nil {
			continue
		}
		limit, err1 := resource.ParseQuantity(string(*x.quota))
		each, err2 := resource.ParseQuantity(string(*x.each))
		if err1 != nil || err2 != nil {
			continue // the schema reports a quantity that does not parse
		}
		sum := each.DeepCopy()
		sum.Mul(int64(n))
		if sum.Cmp(limit) <= 0 {
			continue
		}
		k.errs.add(d.posIn(at, true), at.String(),
			"its %d members need %s %s, more than the company's quota: %s is %s; lower the counts or raise spec.quota.%s",
			n, x.field, sum.String(), k.quotaSource(d, c, x.field), limit.String(), x.field)
	}
}

// quotaSource names where the company's quota field comes from: its own
// spec.quota, Settings spec.defaults.quota, or the schema's default.
func (k *checker) quotaSource(d *document, c *Company, field string) string {
	if p := keys("spec", "quota", field); locate(d.expr, p).found {
		return fmt.Sprintf("Company %s %s (%s)", c.Metadata.Name, p, d.posIn(p, false))
	}
	p := keys("spec", "defaults", "quota", field)
	if k.settingsDoc != nil && locate(k.settingsDoc.expr, p).found {
		return fmt.Sprintf("Settings %s (%s)", p, k.settingsDoc.posIn(p, false))
	}
	return fmt.Sprintf("Settings %s (the default)", p)
}

func podsQuantity(n *int) *Quantity {
	if n == nil {
		return nil
	}
	return ptrQuantity(fmt.Sprint(*n))
}

func ptrQuantity(s string) *Quantity {
	q := Quantity(s)
	return &q
}

func firstQuantity(qs ...*Quantity) *Quantity {
	for _, q := range qs {
		if q != nil {
			return q
		}
	}
	return nil
}

func listCPU(l *ResourceList) *Quantity {
	if l == nil {
		return nil
	}
	return l.CPU
}

func listMemory(l *ResourceList) *Quantity {
	if l == nil {
		return nil
	}
	return l.Memory
}

func listEphemeral(l *ResourceList) *Quantity {
	if l == nil {
		return nil
	}
	return l.EphemeralStorage
}
