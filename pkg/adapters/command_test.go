package adapters

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

const (
	testSession = "3f2c5a8e-1111-4222-8333-944455556666"
	testInstr   = "/paperclip/instructions/AGENTS.md"
	testPrompt  = "Fix the failing test in pkg/foo."
)

// full sets every option of an invocation.
func full(cmd ...string) Invocation {
	return Invocation{Command: cmd, Model: "m-1", Effort: "high", MaxTurns: 30, SessionID: testSession,
		InstructionsFile: testInstr, ExtraArgs: []string{"--extra", "x"}, Prompt: testPrompt, WorkDir: "/work/agent"}
}

func minimal(cmd ...string) Invocation { return Invocation{Command: cmd, Prompt: testPrompt} }

var preamble = instructionsPreamble(testPrompt, testInstr)

func TestCommand(t *testing.T) {
	resumeOnly := func(cmd ...string) Invocation {
		return Invocation{Command: cmd, SessionID: testSession, Prompt: testPrompt}
	}
	tests := []struct {
		name string
		typ  Type
		inv  Invocation
		want Command
	}{
		{"claude minimal", ClaudeLocal, minimal("claude"), Command{
			Args:  []string{"claude", "--print", "--output-format", "stream-json", "--verbose", "--dangerously-skip-permissions"},
			Stdin: []byte(testPrompt), Env: map[string]string{"IS_SANDBOX": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"}}},
		{"claude full", ClaudeLocal, full("npx", "-y", "@anthropic-ai/claude-code"), Command{
			Args: []string{"npx", "-y", "@anthropic-ai/claude-code", "--print", "--output-format", "stream-json", "--verbose",
				"--dangerously-skip-permissions", "--model", "m-1", "--effort", "high", "--max-turns", "30", "--resume", testSession,
				"--append-system-prompt-file", testInstr, "--extra", "x"},
			Stdin: []byte(testPrompt), Env: map[string]string{"IS_SANDBOX": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"},
			Dir: "/work/agent"}},

		{"codex minimal", CodexLocal, minimal("codex"), Command{
			Args:  []string{"codex", "exec", "--json", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox", "-"},
			Stdin: []byte(testPrompt)}},
		{"codex resume", CodexLocal, resumeOnly("codex"), Command{
			Args: []string{"codex", "exec", "--json", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox",
				"resume", testSession, "-"},
			Stdin: []byte(testPrompt)}},
		{"codex full", CodexLocal, full("codex"), Command{
			Args: []string{"codex", "exec", "--json", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox",
				"-m", "m-1", "-c", `model_reasoning_effort="high"`, "--extra", "x", "resume", testSession, "-"},
			Stdin: []byte(preamble), Dir: "/work/agent",
			Warnings: []string{"codex_local: maxTurns is not supported (codex exec has no turn limit) and is ignored"}}},

		{"gemini minimal", GeminiLocal, minimal("gemini"), Command{
			Args:  []string{"gemini", "--output-format", "stream-json", "--yolo", "--skip-trust", "-p", ""},
			Stdin: []byte(testPrompt)}},
		{"gemini full", GeminiLocal, full("gemini"), Command{
			Args: []string{"gemini", "--output-format", "stream-json", "--yolo", "--skip-trust", "-m", "m-1", "--resume", testSession,
				"--extra", "x", "-p", ""},
			Stdin: []byte(preamble), Dir: "/work/agent",
			Warnings: []string{
				"gemini_local: effort is not supported (gemini has no effort flag) and is ignored",
				"gemini_local: maxTurns is not supported (gemini takes maxSessionTurns from settings.json only) and is ignored"}}},

		{"cursor minimal", CursorLocal, minimal("cursor-agent"), Command{
			Args:  []string{"cursor-agent", "--print", "--output-format", "stream-json", "--trust", "--force"},
			Stdin: []byte(testPrompt)}},
		{"cursor full", CursorLocal, full("cursor-agent"), Command{
			Args: []string{"cursor-agent", "--print", "--output-format", "stream-json", "--trust", "--force", "--model", "m-1",
				"--resume", testSession, "--extra", "x"},
			Stdin: []byte(preamble), Dir: "/work/agent",
			Warnings: []string{
				"cursor_local: effort is not supported (cursor-agent has no effort flag; pick a model variant instead) and is ignored",
				"cursor_local: maxTurns is not supported (cursor-agent has no turn limit) and is ignored"}}},

		{"opencode minimal", OpencodeLocal, minimal("opencode"), Command{
			Args:  []string{"opencode", "run", "--format", "json", "--auto", "--print-logs", "--log-level", "ERROR"},
			Stdin: []byte(testPrompt)}},
		{"opencode full", OpencodeLocal, full("opencode"), Command{
			Args: []string{"opencode", "run", "--format", "json", "--auto", "--print-logs", "--log-level", "ERROR", "-m", "m-1",
				"--variant", "high", "-s", testSession, "--extra", "x"},
			Stdin: []byte(preamble), Dir: "/work/agent",
			Warnings: []string{"opencode_local: maxTurns is not supported (opencode run has no turn limit) and is ignored"}}},

		{"pi minimal", PiLocal, minimal("pi"), Command{
			Args: []string{"pi", "--mode", "json", "--print"}, Stdin: []byte(testPrompt)}},
		{"pi full", PiLocal, full("pi"), Command{
			Args: []string{"pi", "--mode", "json", "--print", "--model", "m-1", "--thinking", "high", "--session", testSession,
				"--append-system-prompt", testInstr, "--extra", "x"},
			Stdin: []byte(testPrompt), Dir: "/work/agent",
			Warnings: []string{"pi_local: maxTurns is not supported (pi has no turn limit) and is ignored"}}},

		{"acpx minimal", AcpxLocal, minimal("acpx"), Command{
			Args:  []string{"acpx", "--format", "json", "--json-strict", "--approve-all", "exec", "--file", "-"},
			Stdin: []byte(testPrompt)}},
		{"acpx agent", AcpxLocal, Invocation{Command: []string{"acpx"}, Agent: "claude", Model: "m-1", MaxTurns: 5, Prompt: testPrompt}, Command{
			Args: []string{"acpx", "--format", "json", "--json-strict", "--approve-all", "--model", "m-1", "--max-turns", "5",
				"claude", "exec", "--file", "-"},
			Stdin: []byte(testPrompt)}},
		{"acpx full resume", AcpxLocal, func() Invocation { i := full("acpx"); i.Agent = "codex"; return i }(), Command{
			Args: []string{"sh", "-c", acpxResumeScript, "acpx",
				"acpx", "--format", "json", "--json-strict", "--approve-all", "--model", "m-1", "--max-turns", "30", "--extra", "x",
				"--ttl", "1", "codex"},
			Stdin: []byte(preamble), Env: map[string]string{"PCSYNC_ACPX_SESSION": testSession}, Dir: "/work/agent",
			Warnings: []string{"acpx_local: effort is not supported (acpx has no effort option common to all agents) and is ignored"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := Get(tt.typ)
			if err != nil {
				t.Fatal(err)
			}
			got, err := a.Command(tt.inv)
			if err != nil {
				t.Fatalf("Command: %v", err)
			}
			if diff := cmp.Diff(tt.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("Command (-want +got):\n%s", diff)
			}
		})
	}
}

// The resume script must not interpolate the session id: it reads it from
// the environment, so no id can change the script.
func TestAcpxResumeScriptTakesSessionFromEnv(t *testing.T) {
	got, err := acpx{}.Command(Invocation{Command: []string{"acpx"}, SessionID: testSession, Prompt: "p"})
	if err != nil {
		t.Fatal(err)
	}
	for i, a := range got.Args[:4] {
		if strings.Contains(a, testSession) {
			t.Errorf("arg %d %q of the shell part contains the session id", i, a)
		}
	}
	if got.Env[acpxSessionEnv] != testSession {
		t.Errorf("env %s = %q, want %q", acpxSessionEnv, got.Env[acpxSessionEnv], testSession)
	}
}

func TestCommandRejectsUnsafeInvocations(t *testing.T) {
	base := func() Invocation { return Invocation{Command: []string{"x"}, Prompt: "p"} }
	tests := []struct {
		name   string
		mutate func(*Invocation)
		want   string
		field  InvocationField
	}{
		{"empty command", func(i *Invocation) { i.Command = nil }, "command (executable argv) is empty", FieldCommand},
		{"empty executable", func(i *Invocation) { i.Command = []string{""} }, "command (executable argv) is empty", FieldCommand},
		{"negative max turns", func(i *Invocation) { i.MaxTurns = -1 }, "maxTurns -1 is negative", FieldMaxTurns},
		{"session id as a flag", func(i *Invocation) { i.SessionID = "--dangerous" }, `session id "--dangerous"`, FieldSessionID},
		{"session id with a space", func(i *Invocation) { i.SessionID = "abc def" }, `session id "abc def"`, FieldSessionID},
		{"effort with shell text", func(i *Invocation) { i.Effort = `high"; rm -rf /` }, "is not a level name", FieldEffort},
		{"model as a flag", func(i *Invocation) { i.Model = "--yolo" }, `model "--yolo" starts with '-'`, FieldModel},
		{"instructions as a flag", func(i *Invocation) { i.InstructionsFile = "-x" }, `instructionsFile "-x" starts with '-'`, FieldInstructionsFile},
	}
	for _, typ := range Types() {
		a, err := Get(typ)
		if err != nil {
			t.Fatal(err)
		}
		for _, tt := range tests {
			inv := base()
			tt.mutate(&inv)
			_, err := a.Command(inv)
			if !errors.Is(err, ErrInvalidInvocation) {
				t.Errorf("%s/%s: error %v, want ErrInvalidInvocation", typ, tt.name, err)
				continue
			}
			if !strings.Contains(err.Error(), tt.want) || !strings.HasPrefix(err.Error(), string(typ)+": ") {
				t.Errorf("%s/%s: error %q, want it to start with %q and contain %q", typ, tt.name, err, typ, tt.want)
			}
			var ie *InvocationError
			if !errors.As(err, &ie) || ie.Field != tt.field || ie.Adapter != typ {
				t.Errorf("%s/%s: error %#v, want an *InvocationError of %s about %s", typ, tt.name, err, typ, tt.field)
			}
			// Check refuses what Command refuses, with the same error.
			if cerr := a.Check(inv); cerr == nil || cerr.Error() != err.Error() {
				t.Errorf("%s/%s: Check: %v, want %v", typ, tt.name, cerr, err)
			}
		}
		if err := a.Check(base()); err != nil {
			t.Errorf("%s: Check of a good invocation: %v", typ, err)
		}
	}
	_, err := (acpx{}).Command(Invocation{Command: []string{"acpx"}, Agent: "claude; rm -rf /", Prompt: "p"})
	if ie := (*InvocationError)(nil); !errors.As(err, &ie) || ie.Field != FieldAgent || !errors.Is(err, ErrInvalidInvocation) {
		t.Errorf("acpx with a bad agent name: error %v, want an *InvocationError about Agent", err)
	}
}

// The command's argv must not alias the invocation's slices.
func TestCommandCopiesArgv(t *testing.T) {
	cmd := make([]string, 1, 8)
	cmd[0] = "claude"
	inv := Invocation{Command: cmd, Prompt: "p"}
	for _, typ := range Types() {
		a, _ := Get(typ)
		got, err := a.Command(inv)
		if err != nil {
			t.Fatal(err)
		}
		got.Args[0] = "changed"
		if cmd[0] != "claude" || cmd[:cap(cmd)][1] != "" {
			t.Fatalf("%s: Command wrote into the invocation's Command slice", typ)
		}
	}
}

func TestParseTypeAndGet(t *testing.T) {
	for _, typ := range Types() {
		got, err := ParseType(string(typ))
		if err != nil || got != typ {
			t.Errorf("ParseType(%q) = %q, %v", typ, got, err)
		}
		a, err := Get(typ)
		if err != nil || a.Type() != typ {
			t.Errorf("Get(%q) = %v, %v", typ, a, err)
		}
	}
	if _, err := ParseType("claude"); !errors.Is(err, ErrUnknownType) || !strings.Contains(err.Error(), "claude_local") {
		t.Errorf("ParseType(claude) error = %v, want ErrUnknownType listing the valid names", err)
	}
	if _, err := Get("nope"); !errors.Is(err, ErrUnknownType) {
		t.Errorf("Get(nope) error = %v, want ErrUnknownType", err)
	}
}

func TestBuiltinDefaultsCoverEveryType(t *testing.T) {
	d := BuiltinDefaults()
	versions := CheckedVersions()
	for _, typ := range Types() {
		def, ok := d[typ]
		if !ok {
			t.Errorf("%s: no built-in defaults", typ)
			continue
		}
		if def.Image == "" || len(def.Command) == 0 || len(def.EnvKeys) == 0 || len(def.AllowFQDNs) == 0 {
			t.Errorf("%s: incomplete defaults %+v", typ, def)
		}
		if diff := cmp.Diff(sortedUnique(def.EnvKeys), def.EnvKeys); diff != "" {
			t.Errorf("%s: env keys not sorted and unique (-want +got):\n%s", typ, diff)
		}
		for _, h := range def.AllowFQDNs {
			if !validHostname(h) {
				t.Errorf("%s: egress host %q is not a host name", typ, h)
			}
		}
		if versions[typ] == "" {
			t.Errorf("%s: no checked CLI version recorded", typ)
		}
	}
	if len(d) != len(Types()) {
		t.Errorf("BuiltinDefaults has %d entries, want %d", len(d), len(Types()))
	}
	d[ClaudeLocal] = Defaults{}
	if BuiltinDefaults()[ClaudeLocal].Image == "" {
		t.Error("BuiltinDefaults returned shared state")
	}
}
