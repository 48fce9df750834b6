package inject

import (
	"net/http"

	"github.com/pcsync/pcsync/pkg/adapters"
)

// SpendGate counts what the route's answers cost and refuses a run's
// request once a budget is spent (package spend's Gate).
type SpendGate interface {
	// Admit answers a refused request itself (ok false); else it returns
	// the writer to answer through and a function to call once answered.
	Admit(w http.ResponseWriter, r *http.Request, p adapters.Provider, run string) (mw http.ResponseWriter, done func(), ok bool)
}

// outcomeBudgetSpent: a request refused because a budget is spent.
const outcomeBudgetSpent = "budget_spent"

// admit passes a model provider's request through the spend gate, when
// the route has one.
func (h *Handler) admit(w http.ResponseWriter, r *http.Request, c *Credential, run string) (http.ResponseWriter, func(), bool) {
	if h.opts.Spend == nil || c.Route.Provider == "" {
		return w, func() {}, true
	}
	mw, done, ok := h.opts.Spend.Admit(w, r, c.Route.Provider, run)
	if !ok {
		h.metrics.count(c.Name, outcomeBudgetSpent)
	}
	return mw, done, ok
}
