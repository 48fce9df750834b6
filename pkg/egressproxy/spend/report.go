package spend

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strconv"
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
	_, _ = w.Write(b)
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
}

// newProcessID is 12 random hex digits.
func newProcessID() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b) // never fails (crypto/rand's documentation)
	return hex.EncodeToString(b)
}
