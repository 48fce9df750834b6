//go:build integration

package paperclip_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pcsync/pcsync/pkg/config"
	"github.com/pcsync/pcsync/pkg/health"
	"github.com/pcsync/pcsync/pkg/metrics"
	"github.com/pcsync/pcsync/pkg/paperclip"
	"github.com/pcsync/pcsync/pkg/reconcile"
)

// writeConfig writes a config directory: Settings pointing at url, and
// company acme (Paperclip id cid) with the given agents YAML.
func writeConfig(t *testing.T, dir, url, tokenLine, cid, agents string) *config.Model {
	t.Helper()
	settings := "apiVersion: pcsync.io/v1alpha1\nkind: Settings\nmetadata: {name: fleet}\nspec:\n  paperclip:\n" +
		"    url: " + url + "\n    spoolDir: /srv/spool\n" + tokenLine
	company := "apiVersion: pcsync.io/v1alpha1\nkind: Company\nmetadata: {name: acme}\nspec:\n  id: " + cid +
		"\n  paperclip: {manage: true}\n  agents:\n" + agents
	for name, body := range map[string]string{"settings.yaml": settings, "acme.yaml": company} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	m, err := config.Load(context.Background(), dir, config.LoadOptions{})
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	return m
}

const threeAgents = `    - name: lead
      adapter: claude_local
      paperclip:
        role: cto
        title: Engineering lead
        capabilities: Plans the work and reviews it.
    - name: coder
      adapter: codex_local
      paperclip:
        role: engineer
        title: Coder
        reportsTo: lead
        budgetMonthlyCents: 5000
        runtimeConfig: {heartbeat: {enabled: true, intervalSec: 3600}}
        metadata: {team: core}
    - name: reviewer
      adapter: claude_local
      paperclip: {role: qa, reportsTo: lead}
`

func agentsOf(t *testing.T, cid string) map[string]paperclip.Agent {
	t.Helper()
	var list []paperclip.Agent
	mustCall(t, "GET", "/api/companies/"+cid+"/agents", nil, &list)
	out := map[string]paperclip.Agent{}
	for _, a := range list {
		out[a.Name] = a
	}
	return out
}

// view is what the test checks of an agent.
type view struct {
	Role, Title, ReportsTo, Capabilities, Status, AdapterType string
	AdapterConfig                                             map[string]any
	Budget                                                    int64
	Heartbeat                                                 map[string]any
	Team                                                      any
	Marked                                                    bool
}

func viewOf(a paperclip.Agent, names map[string]string) view {
	v := view{Role: a.Role, Status: string(a.Status), AdapterType: a.AdapterType, AdapterConfig: a.AdapterConfig, Budget: a.BudgetMonthlyCents}
	if a.Title != nil {
		v.Title = *a.Title
	}
	if a.Capabilities != nil {
		v.Capabilities = *a.Capabilities
	}
	if a.ReportsTo != nil {
		v.ReportsTo = names[*a.ReportsTo]
	}
	if h, ok := a.RuntimeConfig["heartbeat"].(map[string]any); ok {
		v.Heartbeat = map[string]any{"enabled": h["enabled"], "intervalSec": h["intervalSec"]}
	}
	v.Team = a.Metadata["team"]
	_, v.Marked = a.Metadata["pcsync"]
	return v
}

func TestReconcileRealPaperclip(t *testing.T) {
	ctx := context.Background()
	var company struct{ ID string }
	mustCall(t, "POST", "/api/companies", map[string]any{"name": "Acme GitOps"}, &company)
	cid := company.ID
	// An agent made by hand in the UI: pcsync must never touch it.
	var hand paperclip.Agent
	mustCall(t, "POST", "/api/companies/"+cid+"/agents", map[string]any{"name": "hand", "role": "pm",
		"adapterType": "process", "adapterConfig": map[string]any{"command": "true"}, "metadata": map[string]any{"team": "ops"}}, &hand)

	proxy := newCounter(t)
	dir := t.TempDir()
	var logs bytes.Buffer
	opts := paperclip.DefaultOptions()
	opts.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	r := paperclip.New(opts)
	ro := paperclip.DefaultReconcileOptions()
	m := writeConfig(t, dir, proxy.URL, "", cid, threeAgents)

	// 1. Three agents, one reporting to another: created, managers first.
	rep, err := r.Reconcile(ctx, m, ro)
	if err != nil || rep.Err() != nil {
		t.Fatalf("first reconcile: %v / %v", err, rep.Err())
	}
	if got := rep.Count("created"); got != 3 {
		t.Fatalf("created %d agents, want 3", got)
	}
	live := agentsOf(t, cid)
	names := map[string]string{}
	for n, a := range live {
		names[a.ID] = n
	}
	want := map[string]view{
		"lead": {Role: "cto", Title: "Engineering lead", Capabilities: "Plans the work and reviews it.", Status: "idle", AdapterType: "pcsync",
			AdapterConfig: map[string]any{"spoolDir": "/srv/spool", "agent": "lead"}, Marked: true},
		"coder": {Role: "engineer", Title: "Coder", ReportsTo: "lead", Status: "idle", AdapterType: "pcsync",
			AdapterConfig: map[string]any{"spoolDir": "/srv/spool", "agent": "coder"}, Budget: 5000,
			Heartbeat: map[string]any{"enabled": true, "intervalSec": float64(3600)}, Team: "core", Marked: true},
		"reviewer": {Role: "qa", ReportsTo: "lead", Status: "idle", AdapterType: "pcsync",
			AdapterConfig: map[string]any{"spoolDir": "/srv/spool", "agent": "reviewer"}, Marked: true},
	}
	for name, w := range want {
		v := viewOf(live[name], names)
		if w.Heartbeat == nil {
			v.Heartbeat = nil
		}
		if d := cmp.Diff(w, v); d != "" {
			t.Errorf("agent %s (-want +got):\n%s", name, d)
		}
	}
	handBefore := live["hand"]

	// 2. A second reconcile with no change sends no write.
	proxy.reset()
	rep, err = r.Reconcile(ctx, m, ro)
	if err != nil || rep.Err() != nil {
		t.Fatalf("second reconcile: %v / %v", err, rep.Err())
	}
	reads, writes := proxy.reset()
	t.Logf("no-op reconcile: %d read and %d write requests (counted by the proxy); report %d/%d", reads, writes, rep.Reads, rep.Writes)
	if writes != 0 || rep.Changed() {
		t.Fatalf("a reconcile with nothing to do sent %d write requests (changed %v)", writes, rep.Changed())
	}

	// 3. A hand PATCH of a managed field is put back; of a field pcsync
	// does not declare, kept.
	mustCall(t, "PATCH", "/api/agents/"+live["lead"].ID, map[string]any{"title": "Chief of everything"}, nil)
	mustCall(t, "PATCH", "/api/agents/"+live["reviewer"].ID, map[string]any{"capabilities": "Reads every diff twice."}, nil)
	mustCall(t, "PATCH", "/api/agents/"+live["coder"].ID, map[string]any{"runtimeConfig": map[string]any{
		"heartbeat": map[string]any{"enabled": true, "intervalSec": 60, "maxConcurrentRuns": 2}}}, nil)
	rep, err = r.Reconcile(ctx, m, ro)
	if err != nil || rep.Err() != nil {
		t.Fatalf("drift reconcile: %v / %v", err, rep.Err())
	}
	if rep.Drift() != 2 || rep.Count("configured") != 2 {
		t.Errorf("drift %d, configured %d; want 2 and 2:\n%s", rep.Drift(), rep.Count("configured"), text(rep))
	}
	reads, writes = proxy.reset()
	t.Logf("drift reconcile: %d read and %d write requests", reads, writes)
	live = agentsOf(t, cid)
	if got := *live["lead"].Title; got != "Engineering lead" {
		t.Errorf("lead title = %q, want it put back", got)
	}
	if got := live["reviewer"].Capabilities; got == nil || *got != "Reads every diff twice." {
		t.Errorf("reviewer capabilities (not declared) = %v, want the hand edit kept", got)
	}
	hb := live["coder"].RuntimeConfig["heartbeat"].(map[string]any)
	if hb["intervalSec"] != float64(3600) || hb["maxConcurrentRuns"] != float64(2) {
		t.Errorf("coder heartbeat = %v, want intervalSec put back and maxConcurrentRuns (not declared) kept", hb)
	}
	if !strings.Contains(logs.String(), "paperclip drift corrected") {
		t.Errorf("no drift log line:\n%s", logs.String())
	}

	// 4. The agent made by hand is untouched.
	if d := cmp.Diff(handBefore, live["hand"]); d != "" {
		t.Errorf("the hand-made agent changed (-before +after):\n%s", d)
	}

	// 5. An agent removed from the config is paused, not deleted; declared
	// again, it is resumed.
	m2 := writeConfig(t, dir, proxy.URL, "", cid, strings.Split(threeAgents, "    - name: reviewer")[0])
	rep, err = r.Reconcile(ctx, m2, ro)
	if err != nil || rep.Err() != nil {
		t.Fatalf("remove reconcile: %v / %v", err, rep.Err())
	}
	live = agentsOf(t, cid)
	if rep.Count("paused") != 1 || live["reviewer"].Status != paperclip.StatusPaused {
		t.Errorf("reviewer status %q, paused %d; want paused:\n%s", live["reviewer"].Status, rep.Count("paused"), text(rep))
	}
	rep, err = r.Reconcile(ctx, m, ro)
	if err != nil || rep.Err() != nil {
		t.Fatalf("re-add reconcile: %v / %v", err, rep.Err())
	}
	live = agentsOf(t, cid)
	if rep.Count("resumed") != 1 || live["reviewer"].Status == paperclip.StatusPaused {
		t.Errorf("reviewer status %q, resumed %d; want resumed:\n%s", live["reviewer"].Status, rep.Count("resumed"), text(rep))
	}
	proxy.reset()
	if rep, err = r.Reconcile(ctx, m, ro); err != nil || rep.Changed() {
		t.Errorf("after resume: %v, changed %v:\n%s", err, rep.Changed(), text(rep))
	}
	if _, writes := proxy.reset(); writes != 0 {
		t.Errorf("after resume: %d writes, want 0", writes)
	}

	// 6. A dry run (pcsync diff) reads only.
	mustCall(t, "PATCH", "/api/agents/"+live["lead"].ID, map[string]any{"role": "ceo"}, nil)
	dry := ro
	dry.DryRun = true
	rep, err = r.Reconcile(ctx, m, dry)
	if err != nil || !rep.Changed() {
		t.Fatalf("dry run: %v, changed %v", err, rep.Changed())
	}
	var diff bytes.Buffer
	_ = rep.WriteDiff(&diff, 3)
	if !strings.Contains(diff.String(), `-role: "ceo"`) || !strings.Contains(diff.String(), `+role: "cto"`) {
		t.Errorf("diff:\n%s", diff.String())
	}
	if _, writes := proxy.reset(); writes != 0 {
		t.Errorf("dry run sent %d writes", writes)
	}
}

// TestBoardKeyNeverShows: a wrong board key is a 401 naming the company,
// and the key appears in no error, report, JSON or log line.
func TestBoardKeyNeverShows(t *testing.T) {
	const secret = "pcp_board_0123456789abcdef0123456789abcdef"
	t.Setenv("TEST_PAPERCLIP_BOARD_KEY", secret)
	var company struct{ ID string }
	mustCall(t, "POST", "/api/companies", map[string]any{"name": "Secretive"}, &company)
	proxy := newCounter(t)
	m := writeConfig(t, t.TempDir(), proxy.URL, "    tokenEnv: TEST_PAPERCLIP_BOARD_KEY\n", company.ID, threeAgents)
	var logs bytes.Buffer
	opts := paperclip.DefaultOptions()
	opts.Logger = slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	rep, err := paperclip.New(opts).Reconcile(context.Background(), m, paperclip.DefaultReconcileOptions())
	if err != nil {
		t.Fatal(err)
	}
	if proxy.authorizations.Load() == 0 {
		t.Fatal("the key was not sent")
	}
	rerr := rep.Err()
	if rerr == nil || !strings.Contains(rerr.Error(), "paperclip company acme") || !strings.Contains(rerr.Error(), "401") {
		t.Fatalf("error = %v, want a 401 naming company acme", rerr)
	}
	var all bytes.Buffer
	all.WriteString(rerr.Error())
	_ = rep.WriteText(&all)
	_ = rep.WriteErrors(&all)
	_ = rep.WriteDiff(&all, 3)
	b, _ := json.Marshal(rep)
	all.Write(b)
	all.Write(logs.Bytes())
	if strings.Contains(all.String(), secret) {
		t.Fatalf("the board key shows:\n%s", all.String())
	}
	t.Logf("what the operator sees: %s", rerr)

	// The daemon's reconcile loop: its log, outcome, health and /metrics.
	logs.Reset()
	mt, hc := metrics.New(), health.NewChecker()
	lo := reconcile.DefaultOptions(m.Dir)
	lo.Watch = false
	lo.Logger = slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	lo.Metrics, lo.Health, lo.Paperclip = mt, hc, paperclip.New(opts)
	loop, err := reconcile.New(nil, lo)
	if err != nil {
		t.Fatal(err)
	}
	out := loop.ReconcileOnce(context.Background())
	if out.FailedStage != reconcile.StagePaperclip {
		t.Fatalf("stage %q, want paperclip (err %v)", out.FailedStage, out.Err)
	}
	srv := httptest.NewServer(hc.Mux(mt.Handler()))
	defer srv.Close()
	var scraped bytes.Buffer
	for _, path := range []string{"/metrics", "/readyz"} {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = scraped.ReadFrom(resp.Body)
		resp.Body.Close()
	}
	if !strings.Contains(scraped.String(), `pcsync_reconcile_errors_total{stage="paperclip"} 1`) {
		t.Errorf("/metrics has no paperclip error:\n%s", scraped.String())
	}
	if s := logs.String() + out.Err.Error() + scraped.String(); strings.Contains(s, secret) {
		t.Fatalf("the board key shows in the daemon's log, outcome, /metrics or /readyz:\n%s", s)
	}
}

// TestPaperclipDown: a server that does not answer is an error naming the
// company.
func TestPaperclipDown(t *testing.T) {
	m := writeConfig(t, t.TempDir(), "http://127.0.0.1:1", "", "00000000-0000-0000-0000-000000000000", threeAgents)
	rep, err := paperclip.New(paperclip.DefaultOptions()).Reconcile(context.Background(), m, paperclip.DefaultReconcileOptions())
	if err != nil {
		t.Fatal(err)
	}
	rerr := rep.Err()
	if rerr == nil || !strings.Contains(rerr.Error(), "paperclip company acme") || !strings.Contains(rerr.Error(), "unreachable") {
		t.Fatalf("error = %v", rerr)
	}
	t.Logf("what the operator sees: %s", rerr)
}

func text(r *paperclip.Report) string {
	var b bytes.Buffer
	_ = r.WriteText(&b)
	_ = r.WriteErrors(&b)
	return b.String()
}
