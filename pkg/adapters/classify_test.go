package adapters

import (
	"testing"

	"github.com/pcsync/pcsync/pkg/result"
)

func TestClassifyText(t *testing.T) {
	tests := []struct {
		text string
		want result.ErrorCode // "" = no class
	}{
		{"No conversation found with session ID: 3f2c", result.ErrSessionNotFound},
		{"thread/resume failed: no rollout found for thread id 019f", result.ErrSessionNotFound},
		{"Error: Session not found", result.ErrSessionNotFound},
		{"No session found matching '3f2c5a8e'", result.ErrSessionNotFound},
		{"Reached maximum number of turns (40)", result.ErrMaxTurns},
		{"FatalTurnLimitedError: Reached max session turns", result.ErrMaxTurns},
		{"There's an issue with the selected model (x). It may not exist", result.ErrModelNotFound},
		{`Error: Model "test-model" not found. Use --list-models`, result.ErrModelNotFound},
		{"ProviderModelNotFoundError: Model not found: a/b", result.ErrModelNotFound},
		{"Not logged in · Please run /login", result.ErrAuthRequired},
		{"unexpected status 401 Unauthorized: Incorrect API key provided", result.ErrAuthRequired},
		{"Failed to authenticate: OAuth session expired", result.ErrAuthRequired},
		{"Please set an Auth method in your settings.json", result.ErrAuthRequired},
		{"You're out of extra usage · resets Apr 24, 4am", result.ErrQuotaExceeded},
		{"You've hit your usage limit. Upgrade to Pro", result.ErrQuotaExceeded},
		{"429 RESOURCE_EXHAUSTED: Quota exceeded for metric", result.ErrQuotaExceeded},
		{"shared rollout token budget exhausted", result.ErrQuotaExceeded},
		{`API Error: 403 {"type":"error","error":{"type":"permission_error","message":"pcsync: budget spent: agent acme/coder has spent $5.01 of its monthly budget of $5.00; raise its budgetMonthlyCents in the Git config, or wait until 2026-12-01 (UTC)"}}`, result.ErrBudgetExceeded},
		{`unexpected status 403 Forbidden: {"error":{"code":"budget_exceeded","message":"pcsync: budget spent: this run has spent $1.02 of company acme's cap of $1.00 a run; raise spec.budget.runCents in its Git config","type":"invalid_request_error"}}`, result.ErrBudgetExceeded},
		{"Rate limit exceeded", result.ErrRateLimited},
		{"429 RESOURCE_EXHAUSTED: Quota exceeded for quota metric 'Generate Content API requests per minute'", result.ErrRateLimited},
		{"429 Too Many Requests", result.ErrRateLimited},
		{"API Error: Unable to connect to API (EAI_AGAIN)", result.ErrUpstreamUnavailable},
		{"Overloaded", result.ErrUpstreamUnavailable},
		{"stream disconnected before completion: failed to lookup address information", result.ErrUpstreamUnavailable},
		{"exception TypeError: fetch failed sending request", result.ErrUpstreamUnavailable},
		{"Selected model is at capacity. Please try a different model.", result.ErrUpstreamUnavailable},
		{"Unexpected server error. Check server logs for details.", ""},
		{"the tests failed", ""},
		{"", ""},
	}
	for _, tt := range tests {
		got, ok := classifyText(tt.text)
		if got != tt.want || ok != (tt.want != "") {
			t.Errorf("classifyText(%q) = %q, %v; want %q", tt.text, got, ok, tt.want)
		}
	}
}

func TestStderrDigest(t *testing.T) {
	tests := []struct{ in, want string }{
		{"YOLO mode is enabled. All tool calls will be automatically approved.\nApproval mode overridden to \"default\"\nPlease set an Auth method\n",
			"Please set an Auth method"},
		{"WARNING: proceeding, even though we could not create PATH aliases\nError: no rollout found\n\nStack backtrace:\n   0: <unknown>\n   1: <unknown>\n",
			"Error: no rollout found"},
		{"\x1b[91m\x1b[1mError: \x1b[0mSession not found\n", "Error: Session not found"},
		{"line one\nline two\nline three\n", "line two; line three"},
		{"Error: a\n    at f (x.js:1:1)\nError: b\nError: c\n", "Error: b; Error: c"},
		{`{"jsonrpc":"2.0","id":null,"error":{"code":-32002,"message":"Resource not found: session s","data":{"acpxCode":"NO_SESSION"}}}`,
			"Resource not found: session s (NO_SESSION)"},
		{"", ""},
	}
	for _, tt := range tests {
		if got := stderrDigest(tt.in); got != tt.want {
			t.Errorf("stderrDigest(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// A clean exit after a success event, a crash, a documented exit code: the
// process outcome decides what the stream cannot.
func TestConcludeFromProcess(t *testing.T) {
	one, fortyOne, oneThirtySeven := 1, 41, 137
	tests := []struct {
		name     string
		v        verdict
		p        ProcessOutcome
		wantCode result.ErrorCode
		wantMsg  string
	}{
		{"success", verdict{cli: "x", needTerminal: true, terminal: true}, exit(0), "", ""},
		{"unknown exit", verdict{cli: "x", needTerminal: true}, ProcessOutcome{}, "", ""},
		{"success then crash", verdict{cli: "x", needTerminal: true, terminal: true}, ProcessOutcome{ExitCode: &one, Stderr: "panic: boom"},
			result.ErrAgentFailed, "x exited with code 1: panic: boom"},
		{"documented exit code", verdict{cli: "gemini", exitMeaning: geminiExits}, ProcessOutcome{ExitCode: &fortyOne},
			result.ErrAuthRequired, "gemini exited with code 41 (authentication error)"},
		{"137", verdict{cli: "x"}, ProcessOutcome{ExitCode: &oneThirtySeven}, result.ErrAgentFailed,
			"x exited with code 137 (killed by SIGKILL; out of memory?)"},
		{"notice classifies", verdict{cli: "x", notice: "Reconnecting... 5/5 (unexpected status 401 Unauthorized)"}, exit(1),
			result.ErrAuthRequired, "x exited with code 1: Reconnecting... 5/5 (unexpected status 401 Unauthorized)"},
		{"timeout wins over the stream's error", verdict{cli: "x", errText: "Rate limit"}, ProcessOutcome{Signal: "SIGKILL", TimedOut: true},
			result.ErrTimeout, "x did not finish before its deadline and was stopped; last message: Rate limit"},
		{"unclassified stream error shows stderr", verdict{cli: "x", errText: "Unexpected server error"}, exitErr(1, "ProviderModelNotFoundError: Model not found: m"),
			result.ErrModelNotFound, "x failed: Unexpected server error; stderr: ProviderModelNotFoundError: Model not found: m; exited with code 1"},
	}
	for _, tt := range tests {
		var o Outcome
		conclude(&o, tt.v, tt.p, newRedactor(nil))
		if got := val(o.ErrorCode); got != tt.wantCode {
			t.Errorf("%s: code %q, want %q", tt.name, got, tt.wantCode)
		}
		if got := val(o.ErrorMessage); got != tt.wantMsg {
			t.Errorf("%s: message %q, want %q", tt.name, got, tt.wantMsg)
		}
	}
}
