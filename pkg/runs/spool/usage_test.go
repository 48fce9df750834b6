package spool

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pcsync/pcsync/pkg/result"
)

// TestCodexThreadTotalsBecomePerRun: Codex reports thread totals. A new
// thread's total is the run's usage; a resumed thread whose previous total
// the daemon kept gets the difference; a resumed thread it never saw keeps
// the total, marked session_cumulative. The fake Codex keeps its threads
// under HOME, which is the agent's own and survives between runs.
func TestCodexThreadTotalsBecomePerRun(t *testing.T) {
	h := newHarness(t, `
  - name: codexer
    adapter: codex_local
    env: {AGENT_MODE: codex}
`)
	perRun, cumulative := result.UsagePerRun, result.UsageSessionCumulative
	tests := []struct {
		name, extra string
		usage       result.Usage
		basis       result.UsageBasis
	}{
		{"c-new", "", result.Usage{InputTokens: 400, CachedInputTokens: 600, OutputTokens: 50}, perRun},
		{"c-resume", "sessionId: thread-c-new\n", result.Usage{InputTokens: 400, CachedInputTokens: 600, OutputTokens: 50}, perRun},
		{"c-again", "sessionId: thread-c-new\n", result.Usage{InputTokens: 400, CachedInputTokens: 600, OutputTokens: 50}, perRun},
		{"c-foreign", "sessionId: thread-from-elsewhere\n", result.Usage{InputTokens: 400, CachedInputTokens: 600, OutputTokens: 50}, cumulative},
	}
	for _, tt := range tests {
		h.drop(tt.name+".yaml", request("codexer", tt.extra))
		h.once() // one at a time: each run resumes the previous one's thread
		got := h.result(tt.name)
		if got.Status != result.StatusSucceeded {
			t.Fatalf("%s: %s %v", tt.name, got.Status, deref(got.ErrorMessage))
		}
		if diff := cmp.Diff(&tt.usage, got.Usage); diff != "" {
			t.Errorf("%s: usage (-want +got):\n%s", tt.name, diff)
		}
		if deref(got.UsageBasis) != tt.basis {
			t.Errorf("%s: usageBasis %v, want %s", tt.name, deref(got.UsageBasis), tt.basis)
		}
	}
}
