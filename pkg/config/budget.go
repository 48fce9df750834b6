package config

import (
	"encoding/json"

	"github.com/pcsync/pcsync/pkg/adapters"
)

// Budget is a company's spec.budget: what its model calls may cost,
// counted by its egress proxy.
type Budget struct {
	MonthlyCents *int64  `json:"monthlyCents,omitempty"`
	RunCents     *int64  `json:"runCents,omitempty"`
	TimeZone     string  `json:"timeZone"`
	Prices       []Price `json:"prices"`
}

// Price is a model's price, in US dollars per million tokens (kept as
// written: decimal).
type Price struct {
	Provider   adapters.Provider `json:"provider"`
	Model      string            `json:"model"`
	Input      json.Number       `json:"input"`
	Output     json.Number       `json:"output"`
	CacheRead  json.Number       `json:"cacheRead,omitempty"`
	CacheWrite json.Number       `json:"cacheWrite,omitempty"`
}

// AgentBudgets are the monthly budgets, in cents, of the company's agents
// that declare one above 0 (paperclip.budgetMonthlyCents; 0 is
// Paperclip's "none").
func (c *Company) AgentBudgets() map[string]int64 {
	out := map[string]int64{}
	for _, a := range c.Spec.Agents {
		if a.Paperclip.BudgetMonthlyCents != nil && *a.Paperclip.BudgetMonthlyCents > 0 {
			out[a.Name] = int64(*a.Paperclip.BudgetMonthlyCents)
		}
	}
	return out
}

// CountsSpend tells whether the company's proxy counts spend: it holds a
// model credential, and the company declares spec.budget or an agent a
// monthly budget.
func (c *Company) CountsSpend() bool {
	model := false
	for _, cr := range c.Spec.Credentials {
		model = model || cr.Provider != adapters.ProviderGitHub
	}
	return model && (c.Spec.Budget != nil || len(c.AgentBudgets()) > 0)
}
