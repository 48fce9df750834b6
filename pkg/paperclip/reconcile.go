package paperclip

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/pcsync/pcsync/pkg/config"
)

// ErrMassPause is wrapped by the error of a reconcile whose pauses the
// guard refused; nothing was paused then.
var ErrMassPause = errors.New("refusing to pause more agents than the prune limit")

// Reconciler keeps the Paperclip side of opted-in companies as the config
// declares it. It is safe for concurrent use.
type Reconciler struct {
	opts Options
	hc   *http.Client
}

// New returns a reconciler.
func New(opts Options) *Reconciler {
	opts.complete()
	hc := opts.HTTPClient
	if hc == nil {
		hc = &http.Client{Timeout: opts.Timeout}
	}
	return &Reconciler{opts: opts, hc: hc}
}

// Wants says whether m has companies whose agents pcsync manages in
// Paperclip: without any, Reconcile sends no request.
func Wants(m *config.Model) bool { return len(Desire(m)) > 0 }

// Token reads the board API key that Settings name (tokenEnv or tokenFile);
// empty when they name none.
func (r *Reconciler) Token(s *config.PaperclipSettings) (string, error) {
	switch {
	case s.TokenEnv != "":
		v := strings.TrimSpace(r.opts.Getenv(s.TokenEnv))
		if v == "" {
			return "", fmt.Errorf("paperclip: the environment variable %s (Settings spec.paperclip.tokenEnv) is empty or not set", s.TokenEnv)
		}
		return v, nil
	case s.TokenFile != "":
		b, err := os.ReadFile(s.TokenFile)
		if err != nil {
			var pe *os.PathError
			if errors.As(err, &pe) {
				err = pe.Err
			}
			return "", fmt.Errorf("paperclip: read the board API key from %s (Settings spec.paperclip.tokenFile): %w", s.TokenFile, err)
		}
		v := strings.TrimSpace(string(b))
		if v == "" {
			return "", fmt.Errorf("paperclip: %s (Settings spec.paperclip.tokenFile) is empty", s.TokenFile)
		}
		return v, nil
	}
	return "", nil
}

// Reconcile makes Paperclip's agents of every opted-in company of m what m
// declares (or, with DryRun, only says what it would do). Errors of one
// company or agent do not stop the others: they are in the report, and
// Report.Err joins them. The returned error is for failures before any
// company was looked at (no board API key) and a refused pause; the report
// is never nil.
func (r *Reconciler) Reconcile(ctx context.Context, m *config.Model, ro ReconcileOptions) (*Report, error) {
	start := time.Now()
	rep := &Report{DryRun: ro.DryRun}
	defer func() { rep.Duration = time.Since(start) }()
	want := Desire(m)
	if len(want) == 0 {
		return rep, nil
	}
	s := m.Settings.Spec.Paperclip
	token, err := r.Token(s)
	if err != nil {
		return rep, err
	}
	c, err := NewClient(ClientOptions{URL: s.URL, Token: token, HTTPClient: r.hc, UserAgent: r.opts.UserAgent})
	if err != nil {
		return rep, err
	}
	defer func() { rep.Reads, rep.Writes = c.Reads(), c.Writes() }()

	// Read and plan every company first, so that the pause guard sees the
	// whole fleet before anything is paused.
	plans := make([]CompanyPlan, len(want))
	lives := make([][]Agent, len(want))
	errs := make([]error, len(want))
	envs := make([][]EnvironmentResult, len(want))
	r.each(len(want), func(i int) {
		ids, er, err := r.ensureEnvironments(ctx, c, want[i], ro.DryRun)
		envs[i] = er
		if err != nil {
			errs[i] = err
			return
		}
		resolveEnvironments(&want[i], ids)
		live, err := c.ListAgents(ctx, want[i].ID)
		if err != nil {
			errs[i] = fmt.Errorf("paperclip company %s (id %s): list agents failed: %w", want[i].Slug, want[i].ID, err)
			return
		}
		lives[i] = live
		plans[i] = Plan(want[i], live)
	})
	guardErr := guard(plans, errs, ro)
	r.each(len(want), func(i int) {
		cr := CompanyResult{Slug: want[i].Slug, ID: want[i].ID, Err: errs[i], Environments: envs[i]}
		if errs[i] == nil {
			cr.Notes = plans[i].Notes
			cr.Agents = r.execute(ctx, c, &plans[i], lives[i], ro, guardErr != nil)
		}
		rep.setCompany(i, len(want), cr)
	})
	return rep, guardErr
}

// each runs f(0..n-1) on the reconciler's workers.
func (r *Reconciler) each(n int, f func(int)) {
	var g errgroup.Group
	g.SetLimit(max(1, r.opts.Workers))
	for i := range n {
		g.Go(func() error { f(i); return nil })
	}
	_ = g.Wait()
}

// guard refuses the fleet's pauses when there are more than ro allows:
// like the Kubernetes prune, an accident (a company's agents gone from the
// config at once, a bad merge) must not pause a fleet, while removing an
// agent or two goes through.
func guard(plans []CompanyPlan, errs []error, ro ReconcileOptions) error {
	if ro.AllowMassPause {
		return nil
	}
	pauses, managed := 0, 0
	var emptied []string
	for i, p := range plans {
		if errs[i] != nil {
			continue
		}
		n := 0
		declared := 0
		for _, a := range p.Actions {
			if a.Verb == VerbPause {
				n++
			} else {
				declared++
			}
		}
		if n > 0 && declared == 0 {
			emptied = append(emptied, p.Slug)
		}
		pauses += n
		managed += p.Managed
	}
	if pauses == 0 {
		return nil
	}
	if len(emptied) > 0 {
		return fmt.Errorf("%w: companies %s declare no agents, so every agent pcsync manages there would be paused; "+
			"nothing was paused; pass --allow-mass-prune if that is really wanted", ErrMassPause, strings.Join(emptied, ", "))
	}
	pm := ro.PauseMax
	limit, err := intstr.GetScaledValueFromIntOrPercent(&pm, managed, false)
	if err != nil {
		return fmt.Errorf("paperclip: invalid prune limit %q: %w", pm.String(), err)
	}
	limit = max(limit, ro.PauseFloor)
	if pauses > limit {
		return fmt.Errorf("%w: %d of the %d agents pcsync manages in Paperclip would be paused, more than --prune-max %s "+
			"(at least %d allowed: %d); nothing was paused; pass --allow-mass-prune if that is really wanted",
			ErrMassPause, pauses, managed, pm.String(), ro.PauseFloor, limit)
	}
	return nil
}

// execute runs a company's plan in order; with refusePauses, pauses are
// reported as refused and not sent.
func (r *Reconciler) execute(ctx context.Context, c *Client, p *CompanyPlan, live []Agent, ro ReconcileOptions, refusePauses bool) []AgentResult {
	ids := map[string]string{} // pcsync name → Paperclip id, managed agents
	for _, a := range p.Actions {
		if a.ID != "" {
			ids[a.Agent] = a.ID
		}
	}
	failed := map[string]bool{}
	out := make([]AgentResult, 0, len(p.Actions))
	for _, a := range p.Actions {
		res := AgentResult{Agent: a.Agent, ID: a.ID, Verb: a.Verb, Changes: a.Changes, Drift: a.Drift}
		switch {
		case a.Verb == VerbNone:
		case a.Verb == VerbPause && refusePauses:
			res.Refused = true
		case ro.DryRun:
		default:
			res.Err = r.act(ctx, c, p, a, ids, failed)
			if res.Err != nil {
				failed[a.Agent] = true
			} else if a.Verb == VerbCreate {
				res.ID = ids[a.Agent]
			}
		}
		if res.Err == nil && !ro.DryRun && a.Writes() && !res.Refused {
			r.log(p, res)
		}
		out = append(out, res)
	}
	return out
}

// act sends one action's requests.
func (r *Reconciler) act(ctx context.Context, c *Client, p *CompanyPlan, a Action, ids map[string]string, failed map[string]bool) error {
	prefix := fmt.Sprintf("paperclip agent %s/%s", p.Slug, a.Agent)
	if a.ID != "" {
		prefix += " (id " + a.ID + ")"
	}
	set := map[string]any{}
	for _, ch := range a.Changes {
		set[ch.Path] = ch.To
	}
	if to, ok := set["reportsTo"].(string); ok {
		id, known := ids[to]
		if !known {
			why := "it does not exist in Paperclip"
			if failed[to] {
				why = "it could not be created"
			}
			return fmt.Errorf("%s: %s failed: reportsTo %q: %s", prefix, a.Verb, to, why)
		}
		set["reportsTo"] = id
	}
	switch a.Verb {
	case VerbCreate:
		set[metadataMarker] = Marker{Agent: a.Agent, Hash: a.desired.Hash, Fields: a.desired.Optional}.value()
		created, err := c.CreateAgent(ctx, p.ID, body(nil, set))
		if err != nil {
			return fmt.Errorf("%s: create failed: %w", prefix, err)
		}
		ids[a.Agent] = created.ID
		return nil
	case VerbUpdate, VerbResume:
		set[metadataMarker] = Marker{Agent: a.Agent, Hash: a.desired.Hash, Fields: a.desired.Optional}.value()
		if _, err := c.UpdateAgent(ctx, a.ID, body(a.live, set)); err != nil {
			return fmt.Errorf("%s: update failed: %w", prefix, err)
		}
		if a.Verb == VerbResume {
			if err := c.ResumeAgent(ctx, a.ID); err != nil {
				return fmt.Errorf("%s: resume failed: %w", prefix, err)
			}
		}
		return nil
	case VerbPause:
		m, _ := a.live.marker()
		m.Paused = true
		if _, err := c.UpdateAgent(ctx, a.ID, body(a.live, map[string]any{metadataMarker: m.value()})); err != nil {
			return fmt.Errorf("%s: pause failed: %w", prefix, err)
		}
		if err := c.PauseAgent(ctx, a.ID); err != nil {
			return fmt.Errorf("%s: pause failed: %w", prefix, err)
		}
		return nil
	}
	return nil
}

// metadataMarker is the field path of the marker.
const metadataMarker = "metadata." + MarkerKey

func (r *Reconciler) log(p *CompanyPlan, res AgentResult) {
	attrs := []any{slog.String("company", p.Slug), slog.String("agent", res.Agent), slog.String("id", res.ID),
		slog.String("action", res.Action())}
	if len(res.Changes) > 0 && res.Verb != VerbCreate {
		paths := make([]string, len(res.Changes))
		for i, ch := range res.Changes {
			paths[i] = ch.Path
		}
		attrs = append(attrs, slog.Any("fields", paths))
	}
	if res.Drift {
		r.opts.Logger.Warn("paperclip drift corrected", attrs...)
		return
	}
	r.opts.Logger.Info("paperclip agent "+res.Action(), attrs...)
}
