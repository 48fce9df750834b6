package config

import (
	"fmt"
	"time"

	"github.com/pcsync/pcsync/pkg/egressproxy/spend"
)

// budget checks a company's spec.budget: a model credential whose answers
// the proxy counts, a time zone the proxy knows, and prices it reads,
// each provider and model once.
func (k *checker) budget(d *document, c *Company) {
	b := c.Spec.Budget
	if b == nil {
		return
	}
	at := keys("spec", "budget")
	if !c.CountsSpend() {
		k.errs.add(d.posIn(at, true), at.String(),
			"company %q: a budget is counted by the egress proxy on the credential route, and the company declares no model credential (spec.credentials)", c.Metadata.Name)
	}
	if _, err := time.LoadLocation(b.TimeZone); err != nil {
		p := at.with(key("timeZone"))
		k.errs.add(d.posIn(p, false), p.String(), "company %q: time zone %q is not an IANA time zone (such as Europe/Paris): %v",
			c.Metadata.Name, b.TimeZone, err)
	}
	seen := map[string]Position{}
	for i, pr := range b.Prices {
		p := at.with(key("prices"), index(i))
		once(k, d, seen, string(pr.Provider)+" "+pr.Model, p.with(key("model")),
			"price of %q is declared twice in company %q (first at %s)", c.Metadata.Name)
		var t spend.Table
		if err := t.Set(pr.Provider, pr.Model, spend.Rate{Input: pr.Input, Output: pr.Output, CacheRead: pr.CacheRead, CacheWrite: pr.CacheWrite}); err != nil {
			k.errs.add(d.posIn(p, true), p.String(), "company %q: %s", c.Metadata.Name, fmt.Sprint(err))
		}
	}
}
