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

// budgetCents is the claude agent's monthly budget in TestBudgetThroughTheProxy:
// each model call of the Anthropic stand-in reports standInAnthropicIn
// (1,234) input tokens, priced at $10 a million (everything else free):
// 1.234 cents a call; 4 calls are 4.94 cents, 5 are 6.17, past 6.
const budgetCents = 6

// TestBudgetThroughTheProxy: the real Claude Code, in Job runs on the real
// node with the enforcer on, against the Anthropic stand-in through its
// tenant's egress proxy, its agent's budgetMonthlyCents the cost of 5 of
// the stand-in's answers at the company's prices. The runs go one after
// another until one fails: the stand-in got exactly 5 model calls (the
// 6th was refused at the proxy); the failed run's result says
// budget_exceeded, with the proxy's refusal, which the CLI printed, naming
// the agent's budget and its spend, $0.07 (5 × 1.234 cents, rounded up):
// what the proxy counted is the stand-in's usage, priced, to the cent.
func TestBudgetThroughTheProxy(t *testing.T) {
	prices := "  budget:\n    prices:\n" +
		"      - {provider: anthropic, model: '*', input: 10, output: 0, cacheRead: 0, cacheWrite: 0}\n" +
		"      - {provider: anthropic, model: 'claude*', input: 10, output: 0, cacheRead: 0, cacheWrite: 0}\n"
	e := newCLIEnv(t, fmt.Sprintf(", paperclip: {budgetMonthlyCents: %d}", budgetCents), prices)
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	e.startDaemon(ctx, t)
	calls := func() int {
		n := 0
		for _, k := range e.api.keys("api.anthropic.com") {
			if k == cliAnthropicKey {
				n++
			}
		}
		return n
	}
	var refused result.RunResult
	var name string
	for i := 1; i <= 8; i++ {
		name = fmt.Sprintf("budget-%d", i)
		dropAgentRun(t, e.spool, name, e.slugA, "claude", "say hi")
		got := waitResult(ctx, t, e.spool, name)
		t.Logf("%s: %s, error %q; the stand-in has had %d model calls", name, got.Status, deref(got.ErrorMessage), calls())
		if got.Status != result.StatusSucceeded {
			refused = got
			break
		}
	}
	if n := calls(); n != 5 {
		t.Errorf("the stand-in got %d model calls of tenant a's claude; want 5: the budget's cost, the 6th refused at the proxy", n)
	}
	want := fmt.Sprintf("pcsync: budget spent: agent %s/claude has spent $0.07 of its monthly budget of $0.%02d", e.slugA, budgetCents)
	b, _ := json.Marshal(refused)
	if refused.Status != result.StatusFailed || refused.ErrorCode == nil || *refused.ErrorCode != result.ErrBudgetExceeded ||
		!strings.Contains(deref(refused.ErrorMessage), want) {
		t.Errorf("the last run's result %s; want failed, budget_exceeded, its error saying %q", b, want)
	}
	log, _ := os.ReadFile(filepath.Join(e.spool, name+".log"))
	if !strings.Contains(string(log), "pcsync: budget spent") {
		t.Errorf("the CLI's output (%s.log) does not print the refusal:\n%s", name, log)
	}
}
