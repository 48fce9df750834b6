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
	// WaitBase: the month's spend is the daemon's to keep (package
	// spendkeep), and a request waits until the proxy has it.
	c := spend.Config{Company: t.c.Metadata.Name, Agents: t.c.AgentBudgets(), AnnotationsFile: tokensFile, WaitBase: true}
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

// spendPullRule lets pcsync's namespace reach the proxy's metrics port
// when the proxy counts spend and that namespace is not the metrics one
// already let in: the daemon pulls each proxy's /spend (package
// spendkeep).
func (t tenant) spendPullRule(policy map[string]any) {
	ns := t.m.Settings.Spec.Pcsync.ServiceAccount.Namespace
	if t.spendConfig() == "" || t.credentialsConfig() == "" || ns == t.m.Settings.Spec.Egress.MetricsNamespace {
		return
	}
	// The metrics port's rule: its second.
	metrics := policy["spec"].(map[string]any)["ingress"].([]any)[1].(map[string]any)
	metrics["from"] = append(metrics["from"].([]any), map[string]any{"namespaceSelector": map[string]any{"matchLabels": map[string]any{
		"kubernetes.io/metadata.name": ns,
	}}})
}
