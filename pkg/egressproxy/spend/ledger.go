package spend

import (
	"fmt"
	"maps"
	"sync"
	"time"
)

// Ledger counts a company's spend in the current month, by agent and by
// run, and tells when a budget is spent. What this process counted (Own)
// is kept apart from what it started from (SetBase: the other processes'
// of the month, from the Record).
type Ledger struct {
	cfg Config
	loc *time.Location
	now func() time.Time

	mu      sync.Mutex
	month   string
	company MicroCents
	agents  map[string]MicroCents
	runs    map[string]MicroCents
	base    Counts
}

// NewLedger returns an empty ledger of cfg's budgets; now is the clock
// (nil: time.Now).
func NewLedger(cfg Config, now func() time.Time) (*Ledger, error) {
	loc, err := cfg.Location()
	if err != nil {
		return nil, err
	}
	if now == nil {
		now = time.Now
	}
	return &Ledger{cfg: cfg, loc: loc, now: now, agents: map[string]MicroCents{}, runs: map[string]MicroCents{}}, nil
}

// Budget names a budget.
type Budget string

// The budgets.
const (
	BudgetCompany Budget = "company"
	BudgetAgent   Budget = "agent"
	BudgetRun     Budget = "run"
)

// Refusal is why a request is refused: its budget, and a message that
// names it and how to raise it.
type Refusal struct {
	Budget  Budget
	Message string
}

// roll starts a new month when the clock has passed into one; l.mu held.
func (l *Ledger) roll() time.Time {
	t := l.now().In(l.loc)
	if m := t.Format("2006-01"); m != l.month {
		l.month, l.company, l.base = m, 0, Counts{}
		l.agents, l.runs = map[string]MicroCents{}, map[string]MicroCents{}
	}
	return t
}

// SetBase sets what the month's other processes counted; a base of
// another month than the ledger's is ignored.
func (l *Ledger) SetBase(month string, base Counts) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.roll(); month == l.month {
		l.base = base.add(Counts{})
	}
}

// Check returns the refusal of a request of run, an agent's, when one of
// its budgets is spent; nil when it may go.
func (l *Ledger) Check(run, agent string) *Refusal {
	l.mu.Lock()
	defer l.mu.Unlock()
	t := l.roll()
	next := func() string {
		return time.Date(t.Year(), t.Month()+1, 1, 0, 0, 0, 0, l.loc).Format("2006-01-02") + " (" + l.loc.String() + ")"
	}
	company, agentSpent, runSpent := l.company+l.base.Company, l.agents[agent]+l.base.Agents[agent], l.runs[run]+l.base.Runs[run]
	if b := FromCents(l.cfg.MonthlyCents); b > 0 && company >= b {
		return &Refusal{BudgetCompany, fmt.Sprintf("pcsync: budget spent: company %s has spent %s of its monthly budget of %s; "+
			"raise spec.budget.monthlyCents in its Git config, or wait until %s", l.cfg.Company, dollars(company), dollars(b), next())}
	}
	if c, ok := l.cfg.Agents[agent]; ok && agent != "" && agentSpent >= FromCents(c) {
		return &Refusal{BudgetAgent, fmt.Sprintf("pcsync: budget spent: agent %s/%s has spent %s of its monthly budget of %s; "+
			"raise its budgetMonthlyCents in the Git config, or wait until %s", l.cfg.Company, agent, dollars(agentSpent), dollars(FromCents(c)), next())}
	}
	if b := FromCents(l.cfg.RunCents); b > 0 && runSpent >= b {
		return &Refusal{BudgetRun, fmt.Sprintf("pcsync: budget spent: this run has spent %s of company %s's cap of %s a run; "+
			"raise spec.budget.runCents in its Git config", dollars(runSpent), l.cfg.Company, dollars(b))}
	}
	return nil
}

// Add counts cost against run, its agent and the company.
func (l *Ledger) Add(run, agent string, cost MicroCents) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.roll()
	l.company += cost
	l.runs[run] += cost
	if agent != "" {
		l.agents[agent] += cost
	}
}

// Company is the company's spend this month, its base's and its own.
func (l *Ledger) Company() MicroCents {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.roll()
	return l.company + l.base.Company
}

// Totals are a month's spend.
type Totals struct {
	Month string `json:"month"`
	Counts
}

// Totals returns the current month's spend: the base's and this
// process's.
func (l *Ledger) Totals() Totals {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.roll()
	return Totals{Month: l.month, Counts: l.own().add(l.base)}
}

// Own returns what this process counted in the current month: its
// report for the Record.
func (l *Ledger) Own() Totals {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.roll()
	return Totals{Month: l.month, Counts: l.own()}
}

// own is this process's counts, in new maps; l.mu held.
func (l *Ledger) own() Counts {
	return Counts{Company: l.company, Agents: maps.Clone(l.agents), Runs: maps.Clone(l.runs)}
}

// dollars is m as US dollars, to the cent (rounded up).
func dollars(m MicroCents) string {
	c := m.Cents()
	return fmt.Sprintf("$%d.%02d", c/100, c%100)
}
