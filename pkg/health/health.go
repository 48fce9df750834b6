// Package health serves the daemon's /healthz and /readyz endpoints from a
// set of named conditions that the daemon's loops keep up to date.
package health

import (
	"encoding/json"
	"net/http"
	"sort"
	"sync"
	"time"
)

// Status is the state of a condition.
type Status string

// Condition statuses.
const (
	StatusTrue  Status = "True"
	StatusFalse Status = "False"
)

// State is the overall readiness the daemon reports.
type State string

// Overall states: ready, ready but degraded (a non-gating condition is
// false, e.g. an invalid config while the last good state is kept), or not
// ready (a gating condition is false).
const (
	StateReady    State = "ready"
	StateDegraded State = "degraded"
	StateNotReady State = "not_ready"
)

// Condition is one named fact about the daemon.
type Condition struct {
	Type    string `json:"type"`
	Status  Status `json:"status"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
	// Gating conditions make /readyz fail while false; the others only
	// mark the daemon degraded.
	Gating             bool      `json:"gating"`
	LastTransitionTime time.Time `json:"lastTransitionTime"`
}

// Report is the body of /readyz.
type Report struct {
	Status     State       `json:"status"`
	Conditions []Condition `json:"conditions"`
}

// Checker holds the conditions; it is safe for concurrent use.
type Checker struct {
	mu    sync.RWMutex
	conds map[string]Condition
	now   func() time.Time
}

// NewChecker returns an empty checker: ready, with no conditions.
func NewChecker() *Checker {
	return &Checker{conds: map[string]Condition{}, now: time.Now}
}

// Set records a condition. The transition time changes only when the status
// does.
func (c *Checker) Set(typ string, ok, gating bool, reason, message string) {
	st := StatusFalse
	if ok {
		st = StatusTrue
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	old, had := c.conds[typ]
	cond := Condition{Type: typ, Status: st, Reason: reason, Message: message, Gating: gating, LastTransitionTime: old.LastTransitionTime}
	if !had || old.Status != st {
		cond.LastTransitionTime = c.now().UTC()
	}
	c.conds[typ] = cond
}

// Report returns the overall state and the conditions sorted by type.
func (c *Checker) Report() Report {
	c.mu.RLock()
	defer c.mu.RUnlock()
	r := Report{Status: StateReady, Conditions: make([]Condition, 0, len(c.conds))}
	for _, cond := range c.conds {
		r.Conditions = append(r.Conditions, cond)
		if cond.Status == StatusTrue {
			continue
		}
		if cond.Gating {
			r.Status = StateNotReady
		} else if r.Status == StateReady {
			r.Status = StateDegraded
		}
	}
	sort.Slice(r.Conditions, func(i, j int) bool { return r.Conditions[i].Type < r.Conditions[j].Type })
	return r
}

// Healthz answers 200 while the process serves HTTP: liveness only.
func (c *Checker) Healthz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write([]byte("ok\n"))
}

// Readyz answers 200 when ready or degraded and 503 when not ready, with the
// Report as JSON.
func (c *Checker) Readyz(w http.ResponseWriter, _ *http.Request) {
	r := c.Report()
	w.Header().Set("Content-Type", "application/json")
	if r.Status == StateNotReady {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(r)
}

// Mux returns a ServeMux with /healthz, /readyz and, when metrics is not
// nil, /metrics.
func (c *Checker) Mux(metrics http.Handler) *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", c.Healthz)
	mux.HandleFunc("GET /readyz", c.Readyz)
	if metrics != nil {
		mux.Handle("GET /metrics", metrics)
	}
	return mux
}
