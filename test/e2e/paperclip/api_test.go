//go:build integration

package paperclip

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pcsync/pcsync/internal/testing/paperclipserver"
)

// api is a client of Paperclip's HTTP API in local_trusted mode (every
// request is the local board; no credentials).
type api struct {
	srv *paperclipserver.Server
}

// company is what POST /api/companies returns (the fields the tests use).
type company struct {
	ID          string `json:"id"`
	Name        string `json:"name"`
	IssuePrefix string `json:"issuePrefix"`
}

// agent is what POST /api/companies/:cid/agents returns.
type agent struct {
	ID          string `json:"id"`
	CompanyID   string `json:"companyId"`
	Name        string `json:"name"`
	URLKey      string `json:"urlKey"`
	AdapterType string `json:"adapterType"`
	Status      string `json:"status"`
}

// heartbeatRun is GET /api/heartbeat-runs/:id.
type heartbeatRun struct {
	ID              string         `json:"id"`
	AgentID         string         `json:"agentId"`
	Status          string         `json:"status"`
	InvocationSrc   string         `json:"invocationSource"`
	ExitCode        *int           `json:"exitCode"`
	Signal          *string        `json:"signal"`
	Error           *string        `json:"error"`
	ErrorCode       *string        `json:"errorCode"`
	UsageJSON       map[string]any `json:"usageJson"`
	ResultJSON      map[string]any `json:"resultJson"`
	SessionIDBefore *string        `json:"sessionIdBefore"`
	SessionIDAfter  *string        `json:"sessionIdAfter"`
	ContextSnapshot map[string]any `json:"contextSnapshot"`
	StartedAt       *time.Time     `json:"startedAt"`
	FinishedAt      *time.Time     `json:"finishedAt"`
	CreatedAt       *time.Time     `json:"createdAt"`
}

// terminal tells whether Paperclip considers the run over.
func (r heartbeatRun) terminal() bool {
	switch r.Status {
	case "succeeded", "failed", "cancelled", "timed_out":
		return true
	}
	return false
}

func str(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// do sends one request (paperclipserver.Server.Call); out (if not nil)
// receives the JSON answer. A status outside 2xx is an error quoting the
// body.
func (a *api) do(ctx context.Context, method, path string, in, out any) error {
	return a.srv.Call(ctx, method, path, in, out)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// must is do for tests: any error is fatal.
func (a *api) must(t testing.TB, method, path string, in, out any) {
	t.Helper()
	// A bound for a hung server, not a timed assertion: a loaded machine
	// (CI, 2 cores) can keep Paperclip busy for a minute.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := a.do(ctx, method, path, in, out); err != nil {
		t.Fatal(err)
	}
}

// waitSession waits until Paperclip has kept session id as the agent's
// (its runtime state), which it does a moment after the run that made it
// is reported succeeded: a wake sent before then is handed no session.
func (a *api) waitSession(t testing.TB, agentID, id string, within time.Duration) {
	t.Helper()
	var st struct {
		SessionID *string `json:"sessionId"`
	}
	for deadline := time.Now().Add(within); ; time.Sleep(200 * time.Millisecond) {
		a.must(t, "GET", "/api/agents/"+agentID+"/runtime-state", nil, &st)
		if str(st.SessionID) == id {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("agent %s's session is %q after %s, want %q", agentID, str(st.SessionID), within, id)
		}
	}
}

func (a *api) createCompany(t testing.TB, name string) company {
	t.Helper()
	var c company
	a.must(t, "POST", "/api/companies", map[string]any{"name": name}, &c)
	return c
}

// createAgent creates an agent of the pcsync adapter type.
func (a *api) createAgent(t testing.TB, cid, name string, adapterConfig map[string]any) agent {
	t.Helper()
	var ag agent
	a.must(t, "POST", "/api/companies/"+cid+"/agents", map[string]any{
		"name": name, "adapterType": "pcsync", "adapterConfig": adapterConfig,
	}, &ag)
	return ag
}

// wake asks Paperclip to run the agent now, as the UI's "Run now" does,
// and returns the heartbeat run it queued.
func (a *api) wake(t testing.TB, agentID, reason string) heartbeatRun {
	t.Helper()
	var r heartbeatRun
	a.must(t, "POST", "/api/agents/"+agentID+"/wakeup", map[string]any{
		"source": "on_demand", "triggerDetail": "manual", "reason": reason,
		"payload": map[string]any{}, "forceFreshSession": false,
	}, &r)
	if r.ID == "" {
		t.Fatalf("wakeup of agent %s returned no run", agentID)
	}
	return r
}

func (a *api) run(t testing.TB, id string) heartbeatRun {
	t.Helper()
	var r heartbeatRun
	a.must(t, "GET", "/api/heartbeat-runs/"+id, nil, &r)
	return r
}

// waitRun polls the run until it is terminal (Paperclip has no watch API
// for runs); within bounds a test that hangs.
func (a *api) waitRun(t testing.TB, id string, within time.Duration) heartbeatRun {
	t.Helper()
	return a.waitRunUntil(t, id, within, heartbeatRun.terminal)
}

func (a *api) waitRunUntil(t testing.TB, id string, within time.Duration, ok func(heartbeatRun) bool) heartbeatRun {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		r := a.run(t, id)
		if ok(r) {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("heartbeat run %s still %s after %s: %+v", id, r.Status, within, r)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// logEntry is one line of GET /api/heartbeat-runs/:id/log.
type logEntry struct {
	TS     string `json:"ts"`
	Stream string `json:"stream"`
	Chunk  string `json:"chunk"`
}

// runLog returns the run's stdout as Paperclip stored it (the chunks of
// stream stdout, concatenated).
func (a *api) runLog(t testing.TB, id string) (stdout string, all []logEntry) {
	t.Helper()
	var page struct {
		Content    string `json:"content"`
		NextOffset *int64 `json:"nextOffset"`
	}
	var raw strings.Builder
	offset := int64(0)
	for range 1000 {
		page.NextOffset = nil
		page.Content = ""
		a.must(t, "GET", fmt.Sprintf("/api/heartbeat-runs/%s/log?offset=%d&limitBytes=1000000", id, offset), nil, &page)
		raw.WriteString(page.Content)
		if page.NextOffset == nil || *page.NextOffset <= offset {
			break
		}
		offset = *page.NextOffset
	}
	var out strings.Builder
	for line := range strings.SplitSeq(raw.String(), "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		var e logEntry
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("run %s log line %q: %v", id, truncate(line, 200), err)
		}
		all = append(all, e)
		if e.Stream == "stdout" {
			out.WriteString(e.Chunk)
		}
	}
	return out.String(), all
}

func (a *api) cancel(t testing.TB, id string) {
	t.Helper()
	a.must(t, "POST", "/api/heartbeat-runs/"+id+"/cancel", map[string]any{}, nil)
}

// costSummary is GET /api/companies/:cid/costs/summary.
type costSummary map[string]any

func (a *api) costs(t testing.TB, cid string) costSummary {
	t.Helper()
	var s costSummary
	a.must(t, "GET", "/api/companies/"+cid+"/costs/summary", nil, &s)
	return s
}

// agentCosts is one agent's line of GET /api/companies/:cid/costs/by-agent.
type agentCosts struct {
	AgentID   string  `json:"agentId"`
	CostCents float64 `json:"costCents"`
	// APIRunCount counts the distinct heartbeat runs of its metered_api
	// cost events.
	APIRunCount int `json:"apiRunCount"`
}

// costsByAgent is GET /api/companies/:cid/costs/by-agent, by agent id.
func (a *api) costsByAgent(t testing.TB, cid string) map[string]agentCosts {
	t.Helper()
	var rows []agentCosts
	a.must(t, "GET", "/api/companies/"+cid+"/costs/by-agent", nil, &rows)
	m := map[string]agentCosts{}
	for _, r := range rows {
		m[r.AgentID] = r
	}
	return m
}

// companyRuns lists the company's heartbeat runs, newest first.
func (a *api) companyRuns(t testing.TB, cid string) []heartbeatRun {
	t.Helper()
	var rs []heartbeatRun
	a.must(t, "GET", "/api/companies/"+cid+"/heartbeat-runs", nil, &rs)
	return rs
}
