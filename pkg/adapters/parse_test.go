package adapters

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pcsync/pcsync/pkg/result"
)

type fixtureCase struct {
	typ   Type
	file  string // under testdata/
	opts  ParserOptions
	proc  ProcessOutcome
	want  want
	exact string // when set, the summary must equal it
	never []string
}

const (
	fxClaudeSession = "11111111-2222-4333-8444-555555555555"
	fxCodexThread   = "019a0000-aaaa-7bbb-8ccc-dddddddddddd"
	fxGeminiSession = "22222222-3333-4444-8555-666666666666"
	fxCursorSession = "33333333-4444-4555-8666-777777777777"
	fxOpencode      = "ses_0aaaaaaaaaaaaabbbbbbbbbbbb"
	fxPiSession     = "44444444-5555-4666-8777-888888888888"
)

func fixtureCases() map[string]fixtureCase {
	f := result.Ptr[float64]
	n := result.Ptr[int]
	perRun, cumulative := result.UsagePerRun, result.UsageSessionCumulative
	killed := ProcessOutcome{Signal: "SIGKILL"}
	codexResumed := ParserOptions{ResumedSessionID: fxCodexThread}
	withStderr := func(code int, file string) ProcessOutcome {
		b, err := os.ReadFile(filepath.Join("testdata", file))
		if err != nil {
			panic(err)
		}
		return exitErr(code, string(b))
	}
	return map[string]fixtureCase{
		// modelUsage (main + subagent) is summed, not the main-only usage;
		// noise lines are skipped.
		"claude subagents and noise": {typ: ClaudeLocal, file: "claude/success-subagents-noise.jsonl", proc: exit(0), want: want{
			SessionID: fxClaudeSession, Model: "claude-sonnet-4-6", Usage: usage(10+7, 2000+30, 100, 50+5), Basis: perRun,
			Cost: f(0.25), NumTurns: n(3), Summary: "Done: 2 files changed."}},
		// Cut mid-line and killed: usage from the last snapshot of each
		// assistant message (msg_a: 5/20/10/40, msg_b: 2/35/0/7).
		"claude truncated and killed": {typ: ClaudeLocal, file: "claude/truncated-killed.jsonl", proc: killed, want: want{
			SessionID: fxClaudeSession, Model: "claude-opus-4-6", Usage: usage(7, 55, 10, 47), Basis: perRun,
			Code: result.ErrAgentFailed, Failed: true, ErrorMessage: "claude was killed by SIGKILL"},
			never: []string{`"type"`}},
		"claude no usage": {typ: ClaudeLocal, file: "claude/success-no-usage.jsonl", proc: exit(0), want: want{
			SessionID: fxClaudeSession, Summary: "ok"}, exact: "ok"},
		"claude model not found": {typ: ClaudeLocal, file: "claude/model-not-found.jsonl", proc: exit(1), want: want{
			SessionID: fxClaudeSession, Model: "claude-nope-9", Usage: usage(0, 0, 0, 0), Basis: perRun, Cost: f(0), NumTurns: n(1),
			Code: result.ErrModelNotFound, Failed: true, ErrorMessage: "issue with the selected model (claude-nope-9)"}},
		"claude overloaded by status": {typ: ClaudeLocal, file: "claude/overloaded-529.jsonl", proc: exit(1), want: want{
			SessionID: fxClaudeSession, Model: "claude-sonnet-4-6", NumTurns: n(2),
			Code: result.ErrUpstreamUnavailable, Failed: true, ErrorMessage: "giving up after repeated errors"}},
		"claude usage limit": {typ: ClaudeLocal, file: "claude/usage-limit-rejected.jsonl", proc: exit(1), want: want{
			SessionID: fxClaudeSession, Model: "claude-sonnet-4-6",
			Code: result.ErrQuotaExceeded, Failed: true, ErrorMessage: "usage limit reached"}},
		"claude rate limit by assistant error": {typ: ClaudeLocal, file: "claude/rate-limit.jsonl", proc: exit(1), want: want{
			SessionID: fxClaudeSession, Code: result.ErrRateLimited, Failed: true, ErrorMessage: "request rejected"}},
		"claude secrets redacted": {typ: ClaudeLocal, file: "claude/secret-in-error.jsonl", proc: exit(1),
			opts: ParserOptions{Secrets: []string{"tok_live_5f3c9a7b2e", "short"}}, want: want{
				SessionID: fxClaudeSession, Code: result.ErrAuthRequired, Failed: true, ErrorMessage: "Invalid API key: " + Redacted},
			never: []string{"sk-ant-api03", "abcdef0123456789abcdef", "tok_live_5f3c9a7b2e"}},
		"claude real resume not found": {typ: ClaudeLocal, file: "claude/real-2.1.197-resume-notfound.jsonl",
			proc: withStderr(1, "claude/real-2.1.197-resume-notfound.stderr.txt"), want: want{
				SessionID: "3f2c5a8e-1111-4222-8333-944455556666", Usage: usage(0, 0, 0, 0), Basis: perRun, Cost: f(0), NumTurns: n(0),
				Code: result.ErrSessionNotFound, Failed: true, ErrorMessage: "No conversation found with session ID"}},
		"claude real not logged in": {typ: ClaudeLocal, file: "claude/real-2.1.197-not-logged-in.jsonl", proc: exit(1), want: want{
			SessionID: "3071fc7b-ea76-4d3d-80b5-cb1e89b9b86e", Model: "claude-sonnet-4-6", Usage: usage(0, 0, 0, 0), Basis: perRun,
			Cost: f(0), NumTurns: n(1), Code: result.ErrAuthRequired, Failed: true, ErrorMessage: "Not logged in"}},
		// No result line and exit 0: the output was cut.
		"claude exit 0 without result": {typ: ClaudeLocal, file: "claude/truncated-killed.jsonl", proc: exit(0), want: want{
			SessionID: fxClaudeSession, Model: "claude-opus-4-6", Usage: usage(7, 55, 10, 47), Basis: perRun,
			Code: result.ErrAgentFailed, Failed: true, ErrorMessage: "ended before the final result event"}},
		"claude cancelled": {typ: ClaudeLocal, file: "claude/truncated-killed.jsonl", proc: ProcessOutcome{Signal: "SIGTERM", Cancelled: true},
			want: want{SessionID: fxClaudeSession, Model: "claude-opus-4-6", Usage: usage(7, 55, 10, 47), Basis: perRun,
				Code: result.ErrCancelled, Failed: true, ErrorMessage: "claude was cancelled"}},

		// Thread totals: 50000 input incl. 40000 cached, 3000 output.
		"codex fresh thread": {typ: CodexLocal, file: "codex/resumed-cumulative.jsonl", proc: exit(0), want: want{
			SessionID: fxCodexThread, Usage: usage(10000, 40000, 0, 3000), Basis: perRun, Cumulative: usage(10000, 40000, 0, 3000)},
			exact: "Fixed: the nil map is now initialised."},
		"codex resumed with previous total": {typ: CodexLocal, file: "codex/resumed-cumulative.jsonl", proc: exit(0),
			opts: ParserOptions{ResumedSessionID: fxCodexThread, PreviousUsage: usage(8000, 30000, 0, 2500), Model: "gpt-5.1-codex"},
			want: want{SessionID: fxCodexThread, Model: "gpt-5.1-codex", Usage: usage(2000, 10000, 0, 500), Basis: perRun,
				Cumulative: usage(10000, 40000, 0, 3000), Summary: "nil map"}},
		"codex resumed without previous total": {typ: CodexLocal, file: "codex/resumed-cumulative.jsonl", proc: exit(0), opts: codexResumed,
			want: want{SessionID: fxCodexThread, Usage: usage(10000, 40000, 0, 3000), Basis: cumulative,
				Cumulative: usage(10000, 40000, 0, 3000), Summary: "nil map"}},
		"codex resumed with a larger previous total": {typ: CodexLocal, file: "codex/resumed-cumulative.jsonl", proc: exit(0),
			opts: ParserOptions{ResumedSessionID: fxCodexThread, PreviousUsage: usage(20000, 0, 0, 0)},
			want: want{SessionID: fxCodexThread, Usage: usage(10000, 40000, 0, 3000), Basis: cumulative,
				Cumulative: usage(10000, 40000, 0, 3000), Summary: "nil map"}},
		"codex usage limit": {typ: CodexLocal, file: "codex/usage-limit.jsonl", proc: exit(1), want: want{
			SessionID: fxCodexThread, Code: result.ErrQuotaExceeded, Failed: true, ErrorMessage: "You've hit your usage limit"}},
		"codex rate limit": {typ: CodexLocal, file: "codex/rate-limit.jsonl", proc: exit(1), want: want{
			SessionID: fxCodexThread, Code: result.ErrRateLimited, Failed: true, ErrorMessage: "Rate limit reached for gpt-5.1-codex"}},
		"codex model not supported": {typ: CodexLocal, file: "codex/model-not-supported.jsonl", proc: exit(1), want: want{
			SessionID: fxCodexThread, Code: result.ErrModelNotFound, Failed: true, ErrorMessage: "'gpt-9-codex' model is not supported"}},
		"codex exits after a top-level error": {typ: CodexLocal, file: "codex/exit-after-error.jsonl", proc: exit(1), want: want{
			SessionID: fxCodexThread, Code: result.ErrAuthRequired, Failed: true,
			ErrorMessage: "codex exited with code 1: unexpected status 401 Unauthorized: Missing bearer or basic authentication"}},
		"codex real resume not found": {typ: CodexLocal, file: "codex/real-0.169.0-resume-notfound.jsonl",
			proc: withStderr(1, "codex/real-0.169.0-resume-notfound.stderr.txt"), opts: codexResumed, want: want{
				Code: result.ErrSessionNotFound, Failed: true, ErrorMessage: "no rollout found for thread id"},
			never: []string{"PATH aliases", "Stack backtrace"}},

		// Summary is the last turn's deltas; output = total − prompt.
		"gemini turns and noise": {typ: GeminiLocal, file: "gemini/multi-turn-noise.jsonl", proc: exit(0), want: want{
			SessionID: fxGeminiSession, Model: "gemini-2.5-pro", Usage: usage(3000, 8000, 0, 12000-11000), Basis: perRun},
			exact: "The build passes now."},
		"gemini quota": {typ: GeminiLocal, file: "gemini/quota.jsonl", proc: exit(1), want: want{
			SessionID: fxGeminiSession, Model: "gemini-2.5-pro", Usage: usage(0, 0, 0, 0), Basis: perRun,
			Code: result.ErrQuotaExceeded, Failed: true, ErrorMessage: "exceeded your current quota"}},
		"gemini result without stats": {typ: GeminiLocal, file: "gemini/result-without-stats.jsonl", proc: exit(0), want: want{
			SessionID: fxGeminiSession, Model: "gemini-2.5-flash"}, exact: "Hello"},
		"gemini real fetch failed": {typ: GeminiLocal, file: "gemini/real-0.61.0-fetch-failed.jsonl",
			proc: withStderr(1, "gemini/real-0.61.0-fetch-failed.stderr.txt"), want: want{
				SessionID: "e46d871f-7f67-49cc-be6a-5eee1dcdd99c", Model: "gemini-2.5-pro", Usage: usage(0, 0, 0, 0), Basis: perRun,
				Code: result.ErrUpstreamUnavailable, Failed: true, ErrorMessage: "fetch failed sending request"}},
		"gemini real resume not found": {typ: GeminiLocal, file: "gemini/real-0.61.0-resume-notfound.jsonl",
			proc: withStderr(42, "gemini/real-0.61.0-resume-notfound.stderr.txt"), want: want{
				Code: result.ErrSessionNotFound, Failed: true, ErrorMessage: "gemini exited with code 42 (input error): Error resuming session"}},
		"gemini timed out": {typ: GeminiLocal, file: "gemini/multi-turn-noise.jsonl", proc: ProcessOutcome{Signal: "SIGKILL", TimedOut: true},
			want: want{SessionID: fxGeminiSession, Model: "gemini-2.5-pro", Usage: usage(3000, 8000, 0, 1000), Basis: perRun,
				Code: result.ErrTimeout, Failed: true, ErrorMessage: "did not finish before its deadline"}},

		"cursor cache usage": {typ: CursorLocal, file: "cursor/cache-usage.jsonl", proc: exit(0), want: want{
			SessionID: fxCursorSession, Model: "gpt-5", Usage: usage(1200, 9000, 300, 80), Basis: perRun}, exact: "Done, tests pass."},
		"cursor error result": {typ: CursorLocal, file: "cursor/error-result.jsonl", proc: exit(1), want: want{
			SessionID: fxCursorSession, Model: "gpt-5", Code: result.ErrQuotaExceeded, Failed: true, ErrorMessage: "usage limit"}},
		"cursor stderr only": {typ: CursorLocal, file: "gemini/real-0.61.0-resume-notfound.jsonl",
			proc: exitErr(1, "Error: Authentication required. Please run 'cursor-agent login' first, or set CURSOR_API_KEY.\n"), want: want{
				Code: result.ErrAuthRequired, Failed: true, ErrorMessage: "cursor-agent exited with code 1: Error: Authentication required"}},

		"opencode provider auth": {typ: OpencodeLocal, file: "opencode/provider-auth-error.jsonl", proc: exit(1), want: want{
			SessionID: fxOpencode, Code: result.ErrAuthRequired, Failed: true, ErrorMessage: "ProviderAuthError: Invalid credentials"}},
		"opencode api 429": {typ: OpencodeLocal, file: "opencode/api-error-429.jsonl", proc: exit(1), want: want{
			SessionID: fxOpencode, Usage: usage(1000, 500, 100, 25), Basis: perRun, Cost: f(0.01), NumTurns: n(1),
			Code: result.ErrRateLimited, Failed: true, ErrorMessage: "APIError: Too Many Requests"}},
		"opencode last message": {typ: OpencodeLocal, file: "opencode/multi-message.jsonl", proc: exit(0), want: want{
			SessionID: fxOpencode, Usage: usage(120, 100, 0, 28), Basis: perRun, Cost: f(0.005), NumTurns: n(2)},
			exact: "Fixed the script.\nAll checks pass."},
		// stdout says only "Unexpected server error"; the error log on
		// stderr names the cause.
		"opencode real unknown model": {typ: OpencodeLocal, file: "opencode/real-1.18.33-unknown-model.jsonl",
			proc: withStderr(1, "opencode/real-1.18.33-unknown-model.stderr.txt"), want: want{
				SessionID: "ses_dfeadf75dffeTgdU7ZV9WFps4r", Code: result.ErrModelNotFound, Failed: true,
				ErrorMessage: "ProviderModelNotFoundError: Model not found: anthropic/claude-nope"}},

		"pi retry failed": {typ: PiLocal, file: "pi/retry-failed.jsonl", proc: exit(0), want: want{
			SessionID: fxPiSession, Model: "claude-sonnet-4-6", Usage: usage(20, 0, 0, 0), Basis: perRun, Cost: f(0), NumTurns: n(2),
			Code: result.ErrRateLimited, Failed: true, ErrorMessage: "per-minute rate limit"}},
		"pi cache usage": {typ: PiLocal, file: "pi/cache-success.jsonl", proc: exit(0), want: want{
			SessionID: fxPiSession, Model: "claude-sonnet-4-6", Usage: usage(130, 10200, 200, 60), Basis: perRun, Cost: f(0.03),
			NumTurns: n(2)}, exact: "All done."},
		"pi aborted": {typ: PiLocal, file: "pi/aborted.jsonl", proc: exit(0), want: want{
			SessionID: fxPiSession, Model: "claude-sonnet-4-6", Usage: usage(10, 0, 0, 2), Basis: perRun, Cost: f(0), NumTurns: n(1),
			Code: result.ErrAgentFailed, Failed: true, ErrorMessage: "stopReason aborted"}},
		// pi exits 0 after three failed retries.
		"pi real connection error": {typ: PiLocal, file: "pi/real-0.73.1-connection-error.jsonl", proc: exit(0), want: want{
			SessionID: "01a20138-b035-7141-9725-a4dd165097dd", Model: "claude-sonnet-4-6", Usage: usage(0, 0, 0, 0), Basis: perRun,
			Cost: f(0), NumTurns: n(4), Code: result.ErrUpstreamUnavailable, Failed: true, ErrorMessage: "pi failed: Connection error."}},

		// total 1500 = 1000 + 300 + 50 thought + 100 + 50 cache: separate.
		"acpx ok": {typ: AcpxLocal, file: "acpx/mock-agent-ok.jsonl", proc: exit(0), want: want{
			SessionID: "sess-mock-1", Usage: usage(1000, 100, 50, 350), Basis: perRun, Cost: f(0.0123)}, exact: "Hello world"},
		"acpx max turns": {typ: AcpxLocal, file: "acpx/mock-agent-maxturns.jsonl", proc: exit(0), want: want{
			SessionID: "sess-mock-1", Usage: usage(1000, 100, 50, 350), Basis: perRun, Cost: f(0.0123),
			Code: result.ErrMaxTurns, Failed: true, ErrorMessage: "max_turn_requests"}},
		"acpx auth": {typ: AcpxLocal, file: "acpx/mock-agent-auth.jsonl", proc: exit(1), want: want{
			SessionID: "sess-mock-1", Code: result.ErrAuthRequired, Failed: true, ErrorMessage: "Authentication required"}},
		"acpx rate limit in details": {typ: AcpxLocal, file: "acpx/mock-agent-fail.jsonl", proc: exit(1), want: want{
			SessionID: "sess-mock-1", Code: result.ErrRateLimited, Failed: true, ErrorMessage: "Internal error: 429 Too Many Requests"}},
		// A resumed session's cost is the session's running total: dropped.
		"acpx resumed": {typ: AcpxLocal, file: "acpx/mock-agent-resume.jsonl", proc: exit(0), opts: ParserOptions{ResumedSessionID: "sess-mock-1"},
			want: want{SessionID: "sess-mock-1", Usage: usage(1000, 100, 50, 350), Basis: perRun}, exact: "Hello world"},
		"acpx resume not found": {typ: AcpxLocal, file: "acpx/mock-agent-resume-notfound.jsonl",
			proc: withStderr(4, "acpx/mock-agent-resume-notfound.stderr.txt"), opts: ParserOptions{ResumedSessionID: "sess-unknown"}, want: want{
				Code: result.ErrSessionNotFound, Failed: true, ErrorMessage: "acpx exited with code 4 (no such session)"}},
		"acpx real claude not logged in": {typ: AcpxLocal, file: "acpx/real-0.19.1-claude-not-logged-in.jsonl", proc: exit(1), want: want{
			SessionID: "89d18146-1dc7-47ab-a6ef-a9d3198dcdbd", Cost: f(0), Code: result.ErrAuthRequired, Failed: true,
			ErrorMessage: "Authentication required"}},
		"acpx real session/new failed": {typ: AcpxLocal, file: "acpx/real-0.19.1-session-new-failed.jsonl", proc: exit(1), want: want{
			Code: result.ErrAgentFailed, Failed: true, ErrorMessage: "Claude Code process exited with code 1"}},
		// total 1300 = input + output: cache inside input, thoughts inside output.
		"acpx inclusive usage": {typ: AcpxLocal, file: "acpx/usage-inclusive.jsonl", proc: exit(0), want: want{
			SessionID: "sess-acp-1", Usage: usage(1000-650, 600, 50, 300), Basis: perRun}, exact: "Answer."},
		// total 1400 = input + output + thought: cache inside input.
		"acpx cache inside input": {typ: AcpxLocal, file: "acpx/usage-cache-in-input.jsonl", proc: exit(0), want: want{
			SessionID: "sess-acp-1", Usage: usage(400, 600, 0, 400), Basis: perRun}, exact: "Answer."},
		"acpx inconsistent total": {typ: AcpxLocal, file: "acpx/usage-inconsistent.jsonl", proc: exit(0), want: want{
			SessionID: "sess-acp-1", Usage: usage(1000, 600, 0, 400), Basis: perRun}, exact: "Answer."},
		"acpx refusal": {typ: AcpxLocal, file: "acpx/refusal.jsonl", proc: exit(0), want: want{
			SessionID: "sess-acp-1", Usage: usage(8, 0, 0, 2), Basis: perRun, Code: result.ErrAgentFailed, Failed: true,
			ErrorMessage: "refused"}},
	}
}

func TestParseFixtures(t *testing.T) {
	for name, tc := range fixtureCases() {
		t.Run(name, func(t *testing.T) {
			got := parseFile(t, tc.typ, filepath.Join("testdata", tc.file), tc.opts, tc.proc)
			if tc.want.Summary == "" {
				tc.want.Summary = tc.exact
			}
			checkOutcome(t, name, tc.want, got)
			if tc.exact != "" && val(got.Summary) != tc.exact {
				t.Errorf("summary = %q, want exactly %q", val(got.Summary), tc.exact)
			}
			for _, s := range tc.never {
				if strings.Contains(val(got.ErrorMessage), s) {
					t.Errorf("error message %q contains %q", val(got.ErrorMessage), s)
				}
			}
		})
	}
}

// Every fixture file is used by a case, so none is dead weight.
func TestEveryFixtureIsUsed(t *testing.T) {
	used := map[string]bool{}
	for _, tc := range fixtureCases() {
		used[tc.file] = true
	}
	files, err := filepath.Glob(filepath.Join("testdata", "*", "*.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		rel, _ := filepath.Rel("testdata", f)
		if !used[filepath.ToSlash(rel)] {
			t.Errorf("fixture %s is used by no case in fixtureCases", rel)
		}
	}
}

// An empty stream and a clean exit give nothing but success for CLIs
// without a final event, and a failure for those that always print one.
func TestEmptyStream(t *testing.T) {
	needsFinal := map[Type]bool{ClaudeLocal: true, CodexLocal: true, GeminiLocal: true, CursorLocal: true, AcpxLocal: true}
	for _, typ := range Types() {
		a, _ := Get(typ)
		got := a.NewParser(ParserOptions{}).Finish(exit(0))
		checkInvariants(t, string(typ), got)
		if got.Usage != nil || got.SessionID != nil || got.CostUSD != nil {
			t.Errorf("%s: empty stream gave usage %v, session %v, cost %v; want all nil", typ, got.Usage, got.SessionID, got.CostUSD)
		}
		if got.Failed != needsFinal[typ] {
			t.Errorf("%s: empty stream with exit 0: failed = %v, want %v", typ, got.Failed, needsFinal[typ])
		}
	}
}
