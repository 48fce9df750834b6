//go:build integration

package realnode

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pcsync/pcsync/pkg/result"
)

// The agents' monthly budgets in TestBudgetThroughTheProxy, each the cost
// of 5 of its stand-in's answers at the company's prices (everything but
// input tokens free): the Anthropic stand-in's 1,234 input tokens at $10 a
// million are 1.234 cents (4 answers 4.94, 5 answers 6.17: past 6); the
// OpenAI stand-in's 321 at $20 a million are 0.642 cents (4 answers 2.57,
// 5 answers 3.21: past 3).
const (
	claudeBudgetCents = 6
	codexBudgetCents  = 3
)

// TestBudgetThroughTheProxy: the real Claude Code and Codex, in Job runs
// on the real node with the enforcer on, against the stand-in providers
// through their tenant's egress proxy, each agent's budgetMonthlyCents the
// cost of 5 of its stand-in's answers at the company's prices. Each
// agent's runs go one after another until one fails: its stand-in got
// exactly 5 model calls (the 6th was refused at the proxy); the failed
// run's result says budget_exceeded, with the proxy's refusal, which the
// CLI printed, naming the agent's budget and its spend (5 answers' cost,
// rounded up to the cent): what the proxy counted is the stand-in's usage,
// priced, to the cent.
func TestBudgetThroughTheProxy(t *testing.T) {
	prices := "  budget:\n    prices:\n"
	for _, p := range []string{"anthropic, model: '*', input: 10", "anthropic, model: 'claude*', input: 10",
		"openai, model: '*', input: 20", "openai, model: 'gpt*', input: 20"} {
		prices += "      - {provider: " + p + ", output: 0, cacheRead: 0, cacheWrite: 0}\n"
	}
	e := newCLIEnv(t, fmt.Sprintf(", paperclip: {budgetMonthlyCents: %d}", claudeBudgetCents),
		fmt.Sprintf(", paperclip: {budgetMonthlyCents: %d}", codexBudgetCents), prices)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	e.startDaemon(ctx, t)
	for _, tc := range []struct {
		agent, host, key string
		budget           int
		spent            string
	}{
		{"claude", "api.anthropic.com", cliAnthropicKey, claudeBudgetCents, "$0.07"},
		{"codex", "api.openai.com", cliOpenAIKey, codexBudgetCents, "$0.04"},
	} {
		t.Run(tc.agent, func(t *testing.T) {
			calls := func() int {
				n := 0
				for _, k := range e.api.keys(tc.host) {
					if k == tc.key {
						n++
					}
				}
				return n
			}
			name, refused := e.runUntilRefused(ctx, t, tc.agent, calls)
			if n := calls(); n != 5 {
				t.Errorf("the stand-in got %d model calls of tenant a's %s; want 5: the budget's cost, the 6th refused at the proxy", n, tc.agent)
			}
			want := fmt.Sprintf("pcsync: budget spent: agent %s/%s has spent %s of its monthly budget of $0.%02d", e.slugA, tc.agent, tc.spent, tc.budget)
			b, _ := json.Marshal(refused)
			if refused.Status != result.StatusFailed || refused.ErrorCode == nil || *refused.ErrorCode != result.ErrBudgetExceeded ||
				!strings.Contains(deref(refused.ErrorMessage), want) {
				t.Errorf("the last run's result %s; want failed, budget_exceeded, its error saying %q", b, want)
			}
			log, _ := os.ReadFile(filepath.Join(e.spool, name+".log"))
			if !strings.Contains(string(log), "pcsync: budget spent") {
				t.Errorf("the CLI's output (%s.log) does not print the refusal:\n%s", name, log)
			}
		})
	}
}

// runUntilRefused runs tenant a's agent, one run after another, until a
// run does not succeed (at most 8), and returns that run's name and
// result.
func (e *cliEnv) runUntilRefused(ctx context.Context, t *testing.T, agent string, calls func() int) (string, result.RunResult) {
	t.Helper()
	for i := 1; i <= 8; i++ {
		name := fmt.Sprintf("budget-%s-%d", agent, i)
		dropAgentRun(t, e.spool, name, e.slugA, agent, "say hi")
		got := waitResult(ctx, t, e.spool, name)
		t.Logf("%s: %s, error %q; the stand-in has had %d model calls", name, got.Status, deref(got.ErrorMessage), calls())
		if got.Status != result.StatusSucceeded {
			return name, got
		}
	}
	t.Fatalf("8 runs of %s succeeded: no budget stopped them", agent)
	return "", result.RunResult{}
}
