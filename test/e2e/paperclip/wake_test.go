//go:build integration

package paperclip

import (
	"strings"
	"testing"
	"time"
)

// runFigures are the figures of a finished run as Paperclip records them.
type runFigures struct {
	Status       string
	Model        string
	Session      string
	InputTokens  int64
	CachedTokens int64
	OutputTokens int64
	CostUSD      float64
}

func num(m map[string]any, k string) float64 {
	v, _ := m[k].(float64)
	return v
}

func figuresOf(r heartbeatRun) runFigures {
	model, _ := r.UsageJSON["model"].(string)
	return runFigures{
		Status: r.Status, Model: model, Session: str(r.SessionIDAfter),
		InputTokens: int64(num(r.UsageJSON, "inputTokens")), CachedTokens: int64(num(r.UsageJSON, "cachedInputTokens")),
		OutputTokens: int64(num(r.UsageJSON, "outputTokens")), CostUSD: num(r.UsageJSON, "costUsd"),
	}
}

func (tr transcript) figures() runFigures {
	return runFigures{Status: "succeeded", Model: tr.Model, Session: tr.SessionID,
		InputTokens: tr.Input, CachedTokens: tr.Cached, OutputTokens: tr.Output, CostUSD: tr.CostUSD}
}

// TestWakeRunsThroughPcsync wakes an agent in Paperclip; the run goes
// through the adapter, the spool and `pcsync daemon --executor local` to the
// stand-in CLI replaying a real transcript, and Paperclip's own records
// show what the transcript says. A second wake resumes the session.
func TestWakeRunsThroughPcsync(t *testing.T) {
	srv := sharedServer(t)
	tr := readTranscript(t, "claude-obers-small-success.jsonl")
	w := newWorld(t, srv, worldOptions{Agents: []pcsyncAgent{{Name: "coder", Transcript: tr.Path}}})
	coder := w.agents["coder"]

	run, _ := runAndCheck(t, srv, coder.ID, "e2e: first wake", runCheck{Within: 2 * time.Minute, Figures: tr.figures(), Transcript: tr})
	req := w.request(run.ID)
	if req["companyId"] != w.company.ID {
		t.Errorf("request companyId = %v, want the Paperclip company %s", req["companyId"], w.company.ID)
	}
	if _, ok := req["sessionId"]; ok {
		t.Errorf("first request carries sessionId %v, want none", req["sessionId"])
	}
	args, env, prompt := w.pc.recorded(strings.ToLower(run.ID))
	if containsArg(args, "--resume") {
		t.Errorf("first run's CLI got --resume: %q", args)
	}
	if prompt == "" {
		t.Errorf("the CLI got an empty prompt")
	}
	if env["PAPERCLIP_COMPANY_ID"] != w.company.ID {
		t.Errorf("PAPERCLIP_COMPANY_ID = %q, want %q", env["PAPERCLIP_COMPANY_ID"], w.company.ID)
	}
	waitSpend(t, srv, w.company.ID, cents(tr.CostUSD))

	// The second wake resumes the session the first one created.
	srv.API.waitSession(t, coder.ID, tr.SessionID, time.Minute)
	run2 := srv.API.wake(t, coder.ID, "e2e: second wake")
	got2 := srv.API.waitRun(t, run2.ID, 2*time.Minute)
	if got2.Status != "succeeded" || str(got2.SessionIDBefore) != tr.SessionID {
		t.Errorf("second run: status %s, sessionIdBefore %q; want succeeded, %q", got2.Status, str(got2.SessionIDBefore), tr.SessionID)
	}
	if req2 := w.request(run2.ID); req2["sessionId"] != tr.SessionID {
		t.Errorf("second request sessionId = %v, want %s", req2["sessionId"], tr.SessionID)
	}
	waitSpend(t, srv, w.company.ID, 2*cents(tr.CostUSD))
	args2, _, _ := w.pc.recorded(strings.ToLower(run2.ID))
	if i := indexArg(args2, "--resume"); i < 0 || i+1 >= len(args2) || args2[i+1] != tr.SessionID {
		t.Errorf("second run's CLI args %q, want --resume %s", args2, tr.SessionID)
	}
}

func indexArg(args []string, a string) int {
	for i, x := range args {
		if x == a {
			return i
		}
	}
	return -1
}

func containsArg(args []string, a string) bool { return indexArg(args, a) >= 0 }
