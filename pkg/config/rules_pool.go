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
	total, helpers := 0, 0
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
		if p.AdapterType != "" {
			k.adapterImage(d, pp.with(key("adapterType")), p.AdapterType, "", "this pool's")
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
		if !k.m.ImageHasServer(image) {
			helpers += p.Count // each member carries the helper container
		}
	}
	if total > 0 {
		k.poolQuota(d, c, total, helpers)
	}
}

// egressQuota checks that the quota holds the egress proxy (egress mode
// proxy) beside the warm pool's members, or beside one agent pod.
func (k *checker) egressQuota(d *document, c *Company) {
	if c.Spec.Sandbox != nil && len(c.Spec.Sandbox.WarmPool) > 0 {
		return // poolQuota counts the proxy
	}
	k.proxyQuota(d, c)
}

// poolQuota refuses a warm pool of n members that the company's quota
// cannot hold: a member is a pod with the requests and limits of a lease
// pod (Settings spec.defaults.resources, else the LimitRange's defaults),
// and helpers of them (of an image without pcsync) also the helper
// container's. In egress mode proxy the proxy's pod is counted beside them.
func (k *checker) poolQuota(d *document, c *Company, n, helpers int) {
	at := keys("spec", "sandbox", "warmPool")
	k.quotaHolds(d, c, n, helpers, at, "lower the counts or raise", func(field, sum string) string {
		if k.m.EgressMode(c) == EgressProxy {
			return fmt.Sprintf("its %d members and the egress proxy need %s %s", n, field, sum)
		}
		return fmt.Sprintf("its %d members need %s %s", n, field, sum)
	})
}

// proxyQuota refuses a company in egress mode proxy whose quota cannot
// hold the proxy's pod beside one agent pod (a Job's or a lease's, with
// the default resources): its agents could never run.
func (k *checker) proxyQuota(d *document, c *Company) {
	if k.m.EgressMode(c) != EgressProxy {
		return
	}
	at := keys("spec", "egress", "mode")
	if !locate(d.expr, at).found {
		at = keys("metadata", "name")
	}
	k.quotaHolds(d, c, 1, 0, at, "raise", func(field, sum string) string {
		return fmt.Sprintf("egress mode proxy: the egress proxy's pod and one agent pod need %s %s", field, sum)
	})
}

// quotaHolds refuses, at field path at, a company whose quota cannot hold
// n pods of the default agent resources (helpers of them with a sandbox
// helper container), plus the egress proxy's pod in egress mode proxy;
// what(field, sum) begins the message, hint ends it ("raise
// spec.quota.<field>").
func (k *checker) quotaHolds(d *document, c *Company, n, helpers int, at fieldPath, hint string, what func(field, sum string) string) {
	q := k.m.Quota(c)
	res := k.m.Settings.Spec.Defaults.Resources
	lr := k.m.LimitRange(c)
	px := EgressProxyResources()
	if k.m.EgressMode(c) != EgressProxy {
		px = Resources{Requests: &ResourceList{}, Limits: &ResourceList{}}
	}
	var pxPods *Quantity
	if k.m.EgressMode(c) == EgressProxy {
		pxPods = ptrQuantity("1")
	}
	hp := SandboxHelperResources()
	need := []struct {
		field               string
		quota               *Quantity
		each, proxy, helper *Quantity
	}{
		{"pods", podsQuantity(q.Pods), ptrQuantity("1"), pxPods, nil},
		{"requestsCpu", q.RequestsCPU, firstQuantity(listCPU(res.Requests), listCPU(lr.DefaultRequest)), px.Requests.CPU, hp.Requests.CPU},
		{"requestsMemory", q.RequestsMemory, firstQuantity(listMemory(res.Requests), listMemory(lr.DefaultRequest)), px.Requests.Memory, hp.Requests.Memory},
		{"limitsCpu", q.LimitsCPU, firstQuantity(listCPU(res.Limits), listCPU(lr.Default)), px.Limits.CPU, hp.Limits.CPU},
		{"limitsMemory", q.LimitsMemory, firstQuantity(listMemory(res.Limits), listMemory(lr.Default)), px.Limits.Memory, hp.Limits.Memory},
		{"limitsEphemeralStorage", q.LimitsEphemeralStorage, firstQuantity(listEphemeral(res.Limits), listEphemeral(lr.Default)), px.Limits.EphemeralStorage, hp.Limits.EphemeralStorage},
	}
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
		if x.proxy != nil {
			sum.Add(resource.MustParse(string(*x.proxy)))
		}
		if x.helper != nil && helpers > 0 {
			h := resource.MustParse(string(*x.helper))
			h.Mul(int64(helpers))
			sum.Add(h)
		}
		if sum.Cmp(limit) <= 0 {
			continue
		}
		k.errs.add(d.posIn(at, true), at.String(),
			"%s, more than the company's quota: %s is %s; %s spec.quota.%s",
			what(x.field, sum.String()), k.quotaSource(d, c, x.field), limit.String(), hint, x.field)
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
