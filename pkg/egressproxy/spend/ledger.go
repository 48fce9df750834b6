package spend

import (
	"fmt"
	"sync"
	"time"
)

// Ledger counts a company's spend in the current month, by agent and by
// run, and tells when a budget is spent.
type Ledger struct {
	cfg Config
	loc *time.Location
	now func() time.Time

	mu      sync.Mutex
	month   string
	company MicroCents
	agents  map[string]MicroCents
	runs    map[string]MicroCents
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
		l.month, l.company = m, 0
		l.agents, l.runs = map[string]MicroCents{}, map[string]MicroCents{}
	}
	return t
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
	if b := FromCents(l.cfg.MonthlyCents); b > 0 && l.company >= b {
		return &Refusal{BudgetCompany, fmt.Sprintf("pcsync: budget spent: company %s has spent %s of its monthly budget of %s; "+
			"raise spec.budget.monthlyCents in its Git config, or wait until %s", l.cfg.Company, dollars(l.company), dollars(b), next())}
	}
	if c, ok := l.cfg.Agents[agent]; ok && agent != "" && l.agents[agent] >= FromCents(c) {
		return &Refusal{BudgetAgent, fmt.Sprintf("pcsync: budget spent: agent %s/%s has spent %s of its monthly budget of %s; "+
			"raise its budgetMonthlyCents in the Git config, or wait until %s", l.cfg.Company, agent, dollars(l.agents[agent]), dollars(FromCents(c)), next())}
	}
	if b := FromCents(l.cfg.RunCents); b > 0 && l.runs[run] >= b {
		return &Refusal{BudgetRun, fmt.Sprintf("pcsync: budget spent: this run has spent %s of company %s's cap of %s a run; "+
			"raise spec.budget.runCents in its Git config", dollars(l.runs[run]), l.cfg.Company, dollars(b))}
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

// Company is the company's spend this month.
func (l *Ledger) Company() MicroCents {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.roll()
	return l.company
}

// Totals are a month's spend.
type Totals struct {
	Month   string                `json:"month"`
	Company MicroCents            `json:"company"`
	Agents  map[string]MicroCents `json:"agents,omitempty"`
	Runs    map[string]MicroCents `json:"runs,omitempty"`
}

// Totals returns the current month's spend.
func (l *Ledger) Totals() Totals {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.roll()
	t := Totals{Month: l.month, Company: l.company, Agents: map[string]MicroCents{}, Runs: map[string]MicroCents{}}
	for k, v := range l.agents {
		t.Agents[k] = v
	}
	for k, v := range l.runs {
		t.Runs[k] = v
	}
	return t
}

// dollars is m as US dollars, to the cent (rounded up).
func dollars(m MicroCents) string {
	c := m.Cents()
	return fmt.Sprintf("$%d.%02d", c/100, c%100)
}
