package render

import (
	"encoding/json"

	"github.com/pcsync/pcsync/pkg/egressproxy/spend"
)

// spendConfig is the JSON of `pcsync egress-proxy --spend`: the company's
// budgets and prices; "" when its proxy counts no spend
// (config.Company.CountsSpend).
func (t tenant) spendConfig() string {
	if !t.c.CountsSpend() {
		return ""
	}
	c := spend.Config{Company: t.c.Metadata.Name, Agents: t.c.AgentBudgets(), AnnotationsFile: tokensFile}
	if b := t.c.Spec.Budget; b != nil {
		c.TimeZone = b.TimeZone
		if b.MonthlyCents != nil {
			c.MonthlyCents = *b.MonthlyCents
		}
		if b.RunCents != nil {
			c.RunCents = *b.RunCents
		}
		for _, p := range b.Prices {
			c.Prices = append(c.Prices, spend.PriceOverride{Provider: p.Provider, Model: p.Model,
				Rate: spend.Rate{Input: p.Input, Output: p.Output, CacheRead: p.CacheRead, CacheWrite: p.CacheWrite}})
		}
	}
	b, err := json.Marshal(c)
	if err != nil {
		// Strings and numbers only: always marshals.
		panic(err)
	}
	return string(b)
}
