package spend

import (
	"cmp"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pcsync/pcsync/pkg/adapters"
)

// Gate counts what the credential route's answers cost, and refuses a
// run's request once its company's, its agent's or its own budget is
// spent. Requests already answering finish: a budget is checked when a
// request comes, counted when its answer ends.
type Gate struct {
	cfg     Config
	process string
	table   Table
	ledger  *Ledger
	agents  *annotationAgents
	logger  *slog.Logger
	metrics *metrics
	// warned are the models logged once as not in the price table.
	warned sync.Map
	// based is set once a base was read (Config.WaitBase).
	based    atomic.Bool
	baseWait time.Duration
	// pulls counts the reports served (/spend).
	pulls atomic.Int64
	// taps are meters' readers no longer in use.
	taps sync.Pool
}

// GateOptions configure a Gate.
type GateOptions struct {
	// Logger receives the refusals and the unpriced models. Default:
	// slog.Default().
	Logger *slog.Logger
	// Registerer takes the metrics; nil: not registered.
	Registerer prometheus.Registerer
	// Now is the clock. Default: time.Now.
	Now func() time.Time
	// Process names this process in the Record. Default: 12 random hex
	// digits.
	Process string
	// BaseWait bounds how long a request waits for the base
	// (Config.WaitBase) before it is answered 503. Default 15s.
	BaseWait time.Duration
}

// NewGate returns the gate of cfg.
func NewGate(cfg Config, opts GateOptions) (*Gate, error) {
	table, err := cfg.Table()
	if err != nil {
		return nil, err
	}
	l, err := NewLedger(cfg, opts.Now)
	if err != nil {
		return nil, err
	}
	g := &Gate{cfg: cfg, process: cmp.Or(opts.Process, newProcessID()), table: table, ledger: l,
		logger: cmp.Or(opts.Logger, slog.Default()), baseWait: cmp.Or(opts.BaseWait, 15*time.Second)}
	g.agents = &annotationAgents{path: cfg.AnnotationsFile, onBase: g.setBase}
	g.metrics, err = newMetrics(opts.Registerer, cfg.Company)
	if err != nil {
		return nil, fmt.Errorf("spend %s: metrics: %w", cfg.Company, err)
	}
	g.metrics.budget.Set(float64(cfg.MonthlyCents))
	return g, nil
}

// Ledger is the gate's ledger.
func (g *Gate) Ledger() *Ledger { return g.ledger }

// Admit answers run's request with the provider's refusal when a budget
// is spent, and a WebSocket's with 404 (ok false); else it returns the
// writer that meters the answer, and done, to call once it is answered.
func (g *Gate) Admit(w http.ResponseWriter, r *http.Request, p adapters.Provider, run string) (mw http.ResponseWriter, done func(), ok bool) {
	if r.Header.Get("Upgrade") != "" {
		// A WebSocket's frames would pass uncounted. Codex tries the
		// Responses API over one first and, answered 404, uses HTTPS.
		http.Error(w, "pcsync: the credential route counts spend, and serves no WebSocket: use HTTPS", http.StatusNotFound)
		return nil, nil, false
	}
	if g.cfg.WaitBase && !g.based.Load() && !g.awaitBase(r, p, w, run) {
		return nil, nil, false
	}
	agent := g.agents.agent(run)
	ref := g.ledger.Check(run, agent)
	g.metrics.month.Set(float64(g.ledger.Company().Cents()))
	if ref != nil {
		g.metrics.refused.WithLabelValues(string(ref.Budget)).Inc()
		g.logger.Warn("credential request refused: budget spent", "company", g.cfg.Company, "agent", agent, "run", run,
			"budget", string(ref.Budget))
		body := refusalBody(p, ref.Message)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.WriteHeader(refusalStatus)
		_, _ = w.Write(body)
		return nil, nil, false
	}
	// The transport asks for gzip itself and hands the answer on
	// decoded: the meter reads it, and the agent gets it plain.
	r.Header.Del("Accept-Encoding")
	m := &meteredWriter{ResponseWriter: w, tap: g.tap(p), g: g, run: run, agent: agent}
	return m, m.end, true
}

// meteredWriter passes an answer to a tap, then to the client; the tap
// reads SSE when the answer's Content-Type says so. What the answer
// reported so far is counted before the bytes that reported it go on, so
// that a CLI's next request finds its cost counted.
type meteredWriter struct {
	http.ResponseWriter
	tap        *tap
	started    bool
	g          *Gate
	run, agent string
	// counted is what the answer's usage so far cost.
	counted MicroCents
}

// count adds what u costs beyond what was counted already.
func (m *meteredWriter) count(u Usage) {
	if u.Tokens() == 0 {
		return
	}
	price, _ := m.g.table.Price(u.Provider, u.Model)
	if cost := price.Cost(u); cost > m.counted {
		m.g.ledger.Add(m.run, m.agent, cost-m.counted)
		m.g.metrics.spent.WithLabelValues(cmp.Or(m.agent, "unknown"), string(u.Provider)).Add(float64(cost - m.counted))
		m.g.metrics.month.Set(float64(m.g.ledger.Company().Cents()))
		m.counted = cost
	}
}

// tap returns a tap of p's answers from the gate's pool.
func (g *Gate) tap(p adapters.Provider) *tap {
	if t, ok := g.taps.Get().(*tap); ok {
		t.reuse(p)
		return t
	}
	return newTap(p, false)
}

// end counts the answer's usage once it has ended, and tells of a model
// the price table does not name.
func (m *meteredWriter) end() {
	u := m.tap.end()
	m.g.taps.Put(m.tap)
	m.tap = nil
	m.count(u)
	if u.Tokens() == 0 {
		return
	}
	if _, known := m.g.table.Price(u.Provider, u.Model); !known {
		m.g.metrics.unpriced.WithLabelValues(string(u.Provider)).Inc()
		if _, seen := m.g.warned.LoadOrStore(string(u.Provider)+"/"+u.Model, true); !seen {
			m.g.logger.Warn("model not in the price table: counted at its provider's fallback price", "company", m.g.cfg.Company,
				"provider", string(u.Provider), "model", u.Model)
		}
	}
}

func (m *meteredWriter) WriteHeader(code int) {
	if !m.started {
		m.started = true
		m.tap.sse = isSSE(m.Header().Get("Content-Type"))
	}
	m.ResponseWriter.WriteHeader(code)
}

func (m *meteredWriter) Write(p []byte) (int, error) {
	if !m.started {
		m.WriteHeader(http.StatusOK)
	}
	m.tap.write(p)
	if m.tap.takeGrew() {
		m.count(m.tap.tally.usage(m.tap.provider))
	}
	return m.ResponseWriter.Write(p)
}

// Flush passes a flush on: a stream's events reach the client as they
// come.
func (m *meteredWriter) Flush() {
	if f, ok := m.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the server's writer.
func (m *meteredWriter) Unwrap() http.ResponseWriter { return m.ResponseWriter }
