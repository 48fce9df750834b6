package metrics

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/pcsync/pcsync/pkg/result"
)

func TestObserveRun(t *testing.T) {
	m := New()
	r := result.New("r1", "acme", "coder", "claude_local")
	r.Status = result.StatusSucceeded
	r.SetTimes(time.Unix(0, 0), time.Unix(12, 0))
	r.Usage = &result.Usage{InputTokens: 10, CachedInputTokens: 100, OutputTokens: 7}
	r.CostUSD = result.Ptr(0.25)
	m.ObserveRun(r)
	m.ObserveRun(r)

	if got := testutil.ToFloat64(m.Runs.WithLabelValues("succeeded", "claude_local", "acme")); got != 2 {
		t.Errorf("runs_total = %v, want 2", got)
	}
	if got := testutil.ToFloat64(m.Tokens.WithLabelValues("acme", "coder", "cached_input")); got != 200 {
		t.Errorf("cached tokens = %v, want 200", got)
	}
	if got := testutil.ToFloat64(m.CostUSD.WithLabelValues("acme", "coder")); got != 0.5 {
		t.Errorf("cost = %v, want 0.5", got)
	}
	// A run without usage adds no token series.
	nr := result.New("r2", "acme", "coder", "claude_local")
	nr.Status = result.StatusFailed
	m.ObserveRun(nr)
	if n := testutil.CollectAndCount(m.Tokens); n != 3 {
		t.Errorf("token series = %d, want 3 (input, cached_input, output)", n)
	}
}

func TestHandlerExposesEveryMetric(t *testing.T) {
	m := New()
	m.ObserveReconcile(2*time.Second, "", time.Unix(1700000000, 0))
	m.ObserveReconcile(time.Second, "apply", time.Unix(1700000001, 0))
	m.ObjectsApplied.WithLabelValues("created").Add(8)
	m.RunsQueued.Set(3)
	m.ObserveRun(result.RunResult{Status: result.StatusSucceeded, Adapter: "codex_local", Company: "acme", Agent: "a"})
	m.RunDuration.WithLabelValues("codex_local", "succeeded").Observe(1)
	m.Tokens.WithLabelValues("acme", "a", "input").Add(1)
	m.CostUSD.WithLabelValues("acme", "a").Add(1)
	m.DriftCorrections.Inc()
	m.Prunes.Inc()

	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, want := range []string{
		`pcsync_reconcile_duration_seconds_count{outcome="success"} 1`,
		`pcsync_reconcile_errors_total{stage="apply"} 1`,
		`pcsync_reconcile_last_success_timestamp_seconds 1.7e+09`,
		`pcsync_objects_applied_total{action="created"} 8`,
		`pcsync_runs_queued 3`,
		`pcsync_runs_in_flight 0`,
		`pcsync_runs_total{adapter="codex_local",company="acme",status="succeeded"} 1`,
		`pcsync_run_duration_seconds_count{adapter="codex_local",status="succeeded"} 1`,
		`pcsync_tokens_total{agent="a",company="acme",kind="input"} 1`,
		`pcsync_cost_usd_total{agent="a",company="acme"} 1`,
		`pcsync_drift_corrections_total 1`,
		`pcsync_pruned_objects_total 1`,
		`pcsync_config_valid 0`,
		`pcsync_leader 0`,
		`go_goroutines`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}
