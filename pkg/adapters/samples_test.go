package adapters

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/pcsync/pcsync/pkg/result"
)

// samplesDir is the repository's copy of the agent transcripts, relative to
// this package's directory (go test runs in it).
const samplesDir = "../../testdata/agent-samples"

type sampleCase struct {
	proc ProcessOutcome // how the CLI ended, from the sample's source notes
	opts ParserOptions
	want want
}

// sampleCases holds the hand-verified expectations for every transcript in
// testdata/agent-samples (numbers read off the transcripts; see each comment).
func sampleCases() map[string]sampleCase {
	f := result.Ptr[float64]
	n := result.Ptr[int]
	perRun := result.UsagePerRun
	return map[string]sampleCase{
		// Result has no usage: the four assistant messages' usage is summed
		// (100+200+150+180 in, 50+100+75+90 cache reads, 75+50+80+60 out).
		"claude-action-sample-turns-fixture.jsonl": {proc: exit(0), want: want{
			SessionID: "sample-session-id", Model: "claude-test-model", Usage: usage(630, 315, 0, 265), Basis: perRun,
			Cost: f(0.0347), Summary: "Successfully removed debug print statement"}},
		// Sanitised capture: no usage anywhere, so usage is null.
		"claude-carbide-read-partial.jsonl": {proc: exit(0), want: want{
			SessionID: "16c61d1b-fe47-4d2a-a97a-fdea9213ac86", Model: "claude-fable-5", Cost: f(0.655998), NumTurns: n(2),
			Summary: "Contents: `hi from file`"}},
		"claude-extra-usage-quota.jsonl": {proc: exit(1), want: want{
			SessionID: "72c16fd3-1f84-4478-afe7-144dbe9b85a3", Usage: usage(0, 0, 0, 0), Basis: perRun, Cost: f(0), NumTurns: n(1),
			Code: result.ErrQuotaExceeded, Failed: true, ErrorMessage: "You're out of extra usage"}},
		"claude-nginx-error-max-turns.jsonl": {proc: exit(1), want: want{
			SessionID: "495cc7e5-d22e-4192-92ba-4ce2d14827a6", Model: "claude-sonnet-5", Usage: usage(2409, 1617801, 29104, 15946),
			Basis: perRun, Cost: f(1.4020935000000005), NumTurns: n(41), Code: result.ErrMaxTurns, Failed: true,
			ErrorMessage: "Reached maximum number of turns (40)"}},
		"claude-oauth-expired-auth.jsonl": {proc: exit(1), want: want{
			SessionID: "f3ab6462-73d0-4598-8a33-f93a02a06603", Code: result.ErrAuthRequired, Failed: true,
			ErrorMessage: "OAuth session expired"}},
		// modelUsage has sonnet (main) and haiku (subagent): summed.
		"claude-obers-eai-again-error.jsonl": {proc: exit(1), want: want{
			SessionID: "089a8030-532e-4087-b58e-0b4f404a83ee", Model: "claude-sonnet-4-6",
			Usage: usage(6+16333, 157738+234127, 57185+109423, 6154+4920), Basis: perRun, Cost: f(0.5552176), NumTurns: n(14),
			Code: result.ErrUpstreamUnavailable, Failed: true, ErrorMessage: "Unable to connect to API (EAI_AGAIN)"}},
		"claude-obers-multiturn-success.jsonl": {proc: exit(0), want: want{
			SessionID: "11da3398-7214-4ed6-8433-c2e5326bad4c", Model: "claude-sonnet-4-6", Usage: usage(14, 535605, 51338, 5381),
			Basis: perRun, Cost: f(0.43395599999999995), NumTurns: n(18), Summary: "All plan items are fully implemented"}},
		"claude-obers-small-success.jsonl": {proc: exit(0), want: want{
			SessionID: "a836554c-7c11-46da-acea-90cedebe45e7", Model: "claude-sonnet-4-6", Usage: usage(2, 8567, 7812, 31),
			Basis: perRun, Cost: f(0.0323361), NumTurns: n(1), Summary: `"verdict":"pass"`}},
		"claude-portpowered-haiku-partial.jsonl": {proc: exit(0), want: want{
			SessionID: "claude-haiku-pinned-session", Model: "claude-haiku-4-5-20251001", Summary: "HAIKU GOLDEN COMPLETE"}},
		// The CLI reports zero usage explicitly: zeros, not null.
		"claude-real-2.1.330-not-logged-in.jsonl": {proc: exit(1), want: want{
			SessionID: "fe33e197-57d6-4f4a-a57f-b0ba80922211", Model: "claude-opus-5-5", Usage: usage(0, 0, 0, 0), Basis: perRun,
			Cost: f(0), NumTurns: n(1), Code: result.ErrAuthRequired, Failed: true, ErrorMessage: "Not logged in"}},
		"claude-scriptorium-bedrock-success.jsonl": {proc: exit(0), want: want{
			SessionID: "22795ca6-8222-4620-91dd-3001deaf3378", Model: "us.anthropic.claude-opus-4-6-v1",
			Usage: usage(18, 169817, 14760, 2577), Basis: perRun, Cost: f(0.2416735), NumTurns: n(15), Summary: "Build compiles cleanly."}},

		// A new thread: the thread total is the run's usage.
		"codex-clutch-pty-hybrid.jsonl": {proc: exit(0), want: want{
			SessionID: "019f0cbe-bd02-75f3-a758-1004ad5cad64", Usage: usage(16731, 0, 0, 12), Basis: perRun,
			Cumulative: usage(16731, 0, 0, 12), Summary: "你好"}},
		// input_tokens 24763 includes 24448 cached.
		"codex-docs-readme-check.jsonl": {proc: exit(0), want: want{
			SessionID: "0199a213-81c0-7800-8aa1-bbab2a035a53", Usage: usage(24763-24448, 24448, 0, 122), Basis: perRun,
			Cumulative: usage(315, 24448, 0, 122), Summary: "there’s a `README.md` in the repository root"}},
		"codex-issue37676-rollout-budget.jsonl": {proc: exit(1), want: want{
			SessionID: "<redacted>", Code: result.ErrQuotaExceeded, Failed: true, ErrorMessage: "shared rollout token budget exhausted"}},
		// Never exits by itself: stopped at the deadline.
		"codex-real-0.169.0-offline-partial.jsonl": {proc: ProcessOutcome{Signal: "SIGKILL", TimedOut: true}, want: want{
			SessionID: "01a20121-c5bc-7310-87a8-feb986cc4a17", Code: result.ErrTimeout, Failed: true,
			ErrorMessage: "Reconnecting... waiting for network"}},
		"codex-scriptorium-401-tail.jsonl": {proc: exit(1), want: want{
			Code: result.ErrAuthRequired, Failed: true, ErrorMessage: "401 Unauthorized: Incorrect API key provided: " + Redacted}},

		"cursor-agentsserver-hello.jsonl": {proc: exit(0), want: want{
			SessionID: "00000000-0000-4000-8000-000000000001", Model: "Auto", Usage: usage(14948, 0, 0, 103), Basis: perRun,
			Summary: "It prints `hello world`."}},

		// total 8064 − prompt 7854 = 210 output (58 candidates + thinking).
		"gemini-cyrus-2plus2-tail.jsonl": {proc: exit(0), want: want{
			Usage: usage(7854, 0, 0, 8064-7854), Basis: perRun, Summary: "2 + 2 = 4."}},
		"gemini-cyrus-maxturns.jsonl": {proc: exit(53), want: want{
			SessionID: "c25acda3-b51f-41f9-9bc5-954c70c17bf4", Model: "auto", Usage: usage(7862, 0, 0, 8255-7862), Basis: perRun,
			Code: result.ErrMaxTurns, Failed: true, ErrorMessage: "Reached max session turns"}},
		// json mode, two models: input (24939−21263)+(8965−0)+28 tool,
		// cached 21263, output 20+154 + 10+30.
		"gemini-docs-json-mode-capital.jsonl": {proc: exit(0), want: want{
			Model: "gemini-2.5-pro", Usage: usage(3676+8965+28, 21263, 0, 214), Basis: perRun, Summary: "The capital of France is Paris."}},
		"gemini-docs-stream-example.jsonl": {proc: exit(0), want: want{
			SessionID: "abc123", Model: "gemini-2.0-flash-exp", Usage: usage(50, 0, 0, 200), Basis: perRun, Summary: "Here are the files..."}},
		"gemini-real-0.61.0-no-auth.jsonl": {proc: exit(41), want: want{
			Code: result.ErrAuthRequired, Failed: true, ErrorMessage: "Please set an Auth method"}},
		// input 21772 uncached, 11879 cached; output 35682 − 33651 = 2031;
		// model "auto" → the busiest model.
		"gemini-sidekick-ok.jsonl": {proc: exit(0), want: want{
			SessionID: "38359eb7-c8e9-48e9-b419-49ce72440d9d", Model: "gemini-3-flash-preview", Usage: usage(21772, 11879, 0, 2031),
			Basis: perRun, Summary: "OK"}},

		// output 27 + reasoning 29.
		"opencode-agentsserver-glob.jsonl": {proc: exit(0), want: want{
			SessionID: "ses_f86f2df67ffep5CKpMOXIyR44R", Usage: usage(9429, 0, 0, 56), Basis: perRun, Cost: f(0), NumTurns: n(1),
			Summary: `a.py contains a single line that prints "hi"`}},
		"opencode-agentsserver-resume-notfound.jsonl": {proc: exit(1), want: want{
			Code: result.ErrSessionNotFound, Failed: true, ErrorMessage: "Session not found"}},
		// stdout alone does not say what went wrong.
		"opencode-agentsserver-unknown-model-error.jsonl": {proc: exit(1), want: want{
			SessionID: "ses_f86f2df67ffep5CKpMOXIyR44R", Code: result.ErrAgentFailed, Failed: true, ErrorMessage: "Unexpected server error"}},
		// Two steps: 21772+671 in, 21415 cache reads, 110+8 out, cost 0+0.001.
		"opencode-takopi-echo-hello.jsonl": {proc: exit(0), want: want{
			SessionID: "ses_494719016ffe85dkDMj0FPRbHK", Usage: usage(22443, 21415, 0, 118), Basis: perRun, Cost: f(0.001), NumTurns: n(2),
			Summary: "```\nhello\n```"}},
		"opencode-v1.17.15-ok.jsonl": {proc: exit(0), want: want{
			SessionID: "ses_0ae437d23ffeJtaD6ceMAAJlCK", Usage: usage(8087, 0, 0, 13), Basis: perRun, Cost: f(0), NumTurns: n(1), Summary: "OK"}},

		// pi exits 0 after a failed model call.
		"pi-untether-error-fixture.jsonl": {proc: exit(0), want: want{
			Model: "gpt-4o-mini", Usage: usage(5, 0, 0, 1), Basis: perRun, Cost: f(0), Code: result.ErrUpstreamUnavailable, Failed: true,
			ErrorMessage: "Upstream error"}},
		// Four assistant messages (1240+680+320+410 in, 182+128+0+96 out);
		// the rate-limit error was retried successfully.
		"pi-untether-print-mode-fixture.jsonl": {proc: exit(0), want: want{
			Model: "gpt-5.1-codex", Usage: usage(2650, 0, 0, 406), Basis: perRun, Cost: f(0.001604 + 0.000936 + 0.00032 + 0.000602),
			NumTurns: n(4), Summary: "Retry succeeded."}},
	}
}

// TestAgentSamples parses every transcript in testdata/agent-samples and
// checks the hand-verified fields. Every transcript must have a case.
func TestAgentSamples(t *testing.T) {
	dir := samplesDir
	if _, err := os.Stat(filepath.Join(dir, "FORMATS.md")); err != nil {
		t.Fatalf("the agent transcripts belong in the repository at testdata/agent-samples: %v", err)
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatalf("%s holds no *.jsonl transcripts", dir)
	}
	cases := sampleCases()
	seen := map[string]bool{}
	for _, path := range files {
		name := filepath.Base(path)
		seen[name] = true
		tc, ok := cases[name]
		if !ok {
			t.Errorf("%s: no expectations for this transcript; add a case to sampleCases", name)
			continue
		}
		typ, err := sampleType(name)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		proc := tc.proc
		if stderr, err := os.ReadFile(strings.TrimSuffix(path, ".jsonl") + ".stderr.txt"); err == nil {
			proc.Stderr = string(stderr)
		}
		got := parseFile(t, typ, path, tc.opts, proc)
		checkOutcome(t, name, tc.want, got)
	}
	var missing []string
	for name := range cases {
		if !seen[name] {
			missing = append(missing, name)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("cases for transcripts that are not in %s: %v", dir, missing)
	}
}

// sampleType maps "claude-…" to claude_local, and so on.
func sampleType(name string) (Type, error) {
	prefix, _, _ := strings.Cut(name, "-")
	return ParseType(prefix + "_local")
}
