package spend

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/pcsync/pcsync/pkg/adapters"
)

// Report is what a proxy process counted this month, for the Record:
// Process is the id it drew at start.
type Report struct {
	Process string `json:"process"`
	Totals
}

// Report returns what this process counted this month.
func (g *Gate) Report() Report { return Report{Process: g.process, Totals: g.ledger.Own()} }

// ServeHTTP answers a GET with the process's Report as JSON: the daemon
// pulls it from the metrics port (/spend).
func (g *Gate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		http.Error(w, "GET only", http.StatusMethodNotAllowed)
		return
	}
	b, err := json.Marshal(g.Report())
	if err != nil {
		// Strings and integers only: always marshals.
		panic(err)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	if _, err := w.Write(b); err == nil {
		g.pulls.Add(1)
	}
}

// AwaitPull returns once /spend has answered after the call (the daemon
// has this process's last figures), or after d: a stopping proxy whose
// spend the daemon keeps (Config.WaitBase) calls it before its metrics
// port closes. At once when the daemon keeps no spend.
func (g *Gate) AwaitPull(d time.Duration) {
	if !g.cfg.WaitBase {
		return
	}
	n := g.pulls.Load()
	for deadline := time.Now().Add(d); g.pulls.Load() == n && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
	}
}

// setBase takes the base annotation's Totals (AnnotationBase): what the
// month's other processes counted. One that does not parse is logged and
// not used.
func (g *Gate) setBase(raw string) {
	var t Totals
	if err := json.Unmarshal([]byte(raw), &t); err != nil {
		g.logger.Warn("spend base annotation not used", "company", g.cfg.Company, "annotation", AnnotationBase, "error", err)
		return
	}
	g.ledger.SetBase(t.Month, t.Counts)
	g.based.Store(true)
}

// awaitBase holds r until the daemon has given this process its base,
// reading the annotations file again every 100 ms; past GateOptions'
// BaseWait (or once r is cancelled) it answers 503 in p's error format,
// which the CLIs retry, and returns false.
func (g *Gate) awaitBase(r *http.Request, p adapters.Provider, w http.ResponseWriter, run string) bool {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	deadline := time.After(g.baseWait)
	for !g.based.Load() {
		select {
		case <-t.C:
			g.agents.agent(run)
		case <-deadline:
			g.logger.Warn("credential request refused: the month's spend not known yet", "company", g.cfg.Company, "run", run)
			body := refusalBody(p, "pcsync: this egress proxy has not received its month's spend from the pcsync daemon yet; try again")
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Content-Length", strconv.Itoa(len(body)))
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write(body)
			return false
		case <-r.Context().Done():
			return false
		}
	}
	return true
}

// newProcessID is 12 random hex digits.
func newProcessID() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b) // never fails (crypto/rand's documentation)
	return hex.EncodeToString(b)
}
