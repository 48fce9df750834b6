package spend

import (
	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	spent    *prometheus.CounterVec
	refused  *prometheus.CounterVec
	unpriced *prometheus.CounterVec
	month    prometheus.Gauge
	budget   prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer, company string) (*metrics, error) {
	cl := prometheus.Labels{"company": company}
	m := &metrics{
		spent: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pcsync_egress_proxy_spend_microcents_total", ConstLabels: cl,
			Help: "What the credential route's answers cost, in millionths of a US cent, by agent and provider.",
		}, []string{"agent", "provider"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pcsync_egress_proxy_budget_refusals_total", ConstLabels: cl,
			Help: "Requests of the credential route refused because a budget is spent, by budget (company, agent, run).",
		}, []string{"budget"}),
		unpriced: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pcsync_egress_proxy_spend_unpriced_total", ConstLabels: cl,
			Help: "Answers of a model the price table does not name, counted at the provider's fallback price.",
		}, []string{"provider"}),
		month: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "pcsync_egress_proxy_spend_month_cents", ConstLabels: cl,
			Help: "The company's spend this month (its time zone's), in US cents, as of its last request.",
		}),
		budget: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "pcsync_egress_proxy_budget_month_cents", ConstLabels: cl,
			Help: "The company's monthly budget in US cents (spec.budget.monthlyCents); 0: none.",
		}),
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.spent, m.refused, m.unpriced, m.month, m.budget} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}
