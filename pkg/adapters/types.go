package adapters

import (
	"errors"
	"fmt"
	"strings"

	"github.com/pcsync/pcsync/pkg/result"
)

// Type names an adapter, as written in an agent's `adapter` field.
type Type string

// The adapter types of docs/design.md.
const (
	ClaudeLocal   Type = "claude_local"
	CodexLocal    Type = "codex_local"
	GeminiLocal   Type = "gemini_local"
	CursorLocal   Type = "cursor_local"
	OpencodeLocal Type = "opencode_local"
	PiLocal       Type = "pi_local"
	AcpxLocal     Type = "acpx_local"
)

// Types lists every adapter type, in the order of docs/design.md. It is the
// one list of adapter names: pkg/config uses Type, and the schema's
// #AdapterType (schema/adapter_types.cue) is generated from this list by
// `go generate ./schema`.
func Types() []Type {
	return []Type{ClaudeLocal, CodexLocal, GeminiLocal, CursorLocal, OpencodeLocal, PiLocal, AcpxLocal}
}

// ErrUnknownType is returned (wrapped) for a string that names no adapter.
var ErrUnknownType = errors.New("unknown adapter type")

// ParseType returns the Type named by s, or an error wrapping ErrUnknownType
// that lists the valid names.
func ParseType(s string) (Type, error) {
	for _, t := range Types() {
		if string(t) == s {
			return t, nil
		}
	}
	names := make([]string, 0, len(Types()))
	for _, t := range Types() {
		names = append(names, string(t))
	}
	return "", fmt.Errorf("adapter %q: %w (want one of %s)", s, ErrUnknownType, strings.Join(names, ", "))
}

// Get returns the adapter for t.
func Get(t Type) (Adapter, error) {
	switch t {
	case ClaudeLocal:
		return claude{}, nil
	case CodexLocal:
		return codex{}, nil
	case GeminiLocal:
		return gemini{}, nil
	case CursorLocal:
		return cursor{}, nil
	case OpencodeLocal:
		return opencode{}, nil
	case PiLocal:
		return pi{}, nil
	case AcpxLocal:
		return acpx{}, nil
	}
	return nil, fmt.Errorf("adapter %q: %w", string(t), ErrUnknownType)
}

// Invocation is what a run asks of an agent CLI. Command comes from the
// config (the adapter's `command`, e.g. ["claude"]); the rest from the agent's
// config and the run request.
type Invocation struct {
	// Command is the executable argv prefix; it must not be empty.
	Command []string
	// Model is passed with the CLI's model flag when not empty.
	Model string
	// Effort is the reasoning effort or variant (claude --effort, codex
	// model_reasoning_effort, opencode --variant, pi --thinking).
	Effort string
	// MaxTurns limits agentic turns where the CLI supports it; 0 means no limit.
	MaxTurns int
	// SessionID resumes that session when not empty.
	SessionID string
	// InstructionsFile is a path, inside the agent's container, to a file of
	// standing instructions for the agent.
	InstructionsFile string
	// ExtraArgs are appended to the CLI's options (see each adapter for where).
	ExtraArgs []string
	// Prompt is the task; it is delivered on stdin.
	Prompt string
	// WorkDir is the directory to run in; copied to Command.Dir.
	WorkDir string
	// Agent selects the ACP agent that acpx drives (claude, codex, gemini, …);
	// only acpx_local reads it, and empty means acpx's configured default.
	Agent string
}

// Command is how to start the CLI for one run.
type Command struct {
	// Args is the full argv, executable first.
	Args []string
	// Stdin is written to the process's standard input, which is then closed.
	// Every adapter delivers the prompt this way: an argument is limited to
	// 128 KiB on Linux and a prompt may be up to 1 MiB.
	Stdin []byte
	// Env holds variables the adapter itself needs (e.g. IS_SANDBOX=1); they
	// are set on top of the agent's environment.
	Env map[string]string
	// Dir is the working directory, "" for the runner's default.
	Dir string
	// Warnings name options the CLI has no way to honour (e.g. max turns for
	// codex); the run goes ahead without them, and the runner should log them.
	Warnings []string
}

// Adapter is the behaviour pcsync needs from one agent CLI. Implementations
// are stateless and safe for concurrent use.
type Adapter interface {
	// Type returns the adapter's type.
	Type() Type
	// Check reports whether Command can build inv's command line, without
	// building it: an *InvocationError (wrapping ErrInvalidInvocation) when
	// not. Command fails exactly when Check does.
	Check(inv Invocation) error
	// Command builds the command line for inv.
	Command(inv Invocation) (Command, error)
	// ForwardEnvKeys returns env keys to forward beyond the configured
	// envKeys, decided by the agent's env (e.g. AWS keys when
	// CLAUDE_CODE_USE_BEDROCK is set); sorted, without duplicates.
	ForwardEnvKeys(env map[string]string) []string
	// EgressHosts returns hosts the agent must reach beyond the configured
	// allowFqdns, decided by the agent's env (Bedrock's regional endpoint,
	// the host of a custom base URL); sorted, deduplicated, valid DNS names.
	EgressHosts(env map[string]string) []string
	// NewParser returns a parser for one run's stdout.
	NewParser(opts ParserOptions) Parser
}

// Parser reads one run's stdout. Feed it every line as it arrives, then call
// Finish once. A Parser is not safe for concurrent use.
type Parser interface {
	// Feed takes one line of stdout, without its line terminator, and does
	// not keep line after it returns. Lines that are not JSON, or JSON of an
	// unknown shape, are tolerated.
	Feed(line []byte)
	// Finish combines what was fed with how the process ended.
	Finish(p ProcessOutcome) Outcome
}

// ParserOptions carries what the parser cannot see in the stream.
type ParserOptions struct {
	// ResumedSessionID is the session the run resumed ("" for a new session).
	ResumedSessionID string
	// PreviousUsage is the session's cumulative usage after its previous run
	// (Outcome.SessionCumulativeUsage of that run), when known. CLIs that
	// report session totals (Codex) then get per-run usage.
	PreviousUsage *result.Usage
	// Model is the configured model, reported when the CLI names none.
	Model string
	// Secrets are values (e.g. of forwarded env keys) that must never appear
	// in an error message; values shorter than 8 bytes are ignored.
	Secrets []string
}

// ProcessOutcome is how the CLI process ended.
type ProcessOutcome struct {
	// ExitCode is nil when the process was killed by a signal or never ran.
	ExitCode *int
	// Signal names the signal that ended the process (e.g. "SIGKILL"), if any.
	Signal string
	// TimedOut is set when pcsync stopped the process at its deadline.
	TimedOut bool
	// Cancelled is set when pcsync stopped the process on a cancel request.
	Cancelled bool
	// Stderr is the tail of the process's standard error.
	Stderr string
}

// Outcome holds the result fields a run gets from its CLI's output. Nil
// pointers mean unknown.
type Outcome struct {
	// SessionID is the CLI's session, to resume with a later run.
	SessionID *string
	// Summary is the final assistant or result text of a successful run.
	Summary *string
	// Model is the model the CLI reported, else the configured one.
	Model *string
	// Usage is the run's token accounting (see docs/design.md), nil if unknown.
	Usage *result.Usage
	// UsageBasis says what period Usage covers; set exactly when Usage is.
	UsageBasis *result.UsageBasis
	// CostUSD is the CLI's own cost figure, nil when it reports none.
	CostUSD *float64
	// NumTurns counts the run's agentic turns where the CLI reports them.
	NumTurns *int
	// SessionCumulativeUsage is the session's running total as the CLI
	// reported it (Codex only); store it and pass it as
	// ParserOptions.PreviousUsage when the session is resumed.
	SessionCumulativeUsage *result.Usage
	ErrorCode              *result.ErrorCode
	ErrorMessage           *string
	// Failed is set when the run did not succeed; ErrorCode and ErrorMessage
	// are then set too.
	Failed bool
}

// Defaults is what this package believes an adapter type needs by default.
// The authoritative defaults live in the CUE schema.
type Defaults struct {
	// Image is the name of pcsync's image of the CLI (package images).
	Image string
	// EnvKeys are the env keys forwarded to the agent, sorted.
	EnvKeys []string
	// AllowFQDNs are the hosts the agent must reach.
	AllowFQDNs []string
	// Command is the executable argv prefix.
	Command []string
}

// BuiltinDefaults returns, per adapter type, the image, env keys, egress
// hosts and executable that the CLI needs, so that a test can cross-check the
// schema's defaults against them. A new map is returned on every call.
func BuiltinDefaults() map[Type]Defaults {
	// The name of pcsync's image of each CLI (package images); pcsync
	// places it in a registry with a tag.
	const registry = "pcsync-agent-"
	return map[Type]Defaults{
		ClaudeLocal: {
			Image:      registry + "claude",
			EnvKeys:    []string{"ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL", "CLAUDE_CODE_OAUTH_TOKEN", "CLAUDE_CODE_USE_BEDROCK"},
			AllowFQDNs: []string{"api.anthropic.com"},
			Command:    []string{"claude"},
		},
		CodexLocal: {
			Image:      registry + "codex",
			EnvKeys:    []string{"CODEX_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL"},
			AllowFQDNs: []string{"api.openai.com"},
			Command:    []string{"codex"},
		},
		GeminiLocal: {
			Image:      registry + "gemini",
			EnvKeys:    []string{"GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_GEMINI_BASE_URL"},
			AllowFQDNs: []string{"generativelanguage.googleapis.com"},
			Command:    []string{"gemini"},
		},
		CursorLocal: {
			Image:      registry + "cursor",
			EnvKeys:    []string{"CURSOR_API_KEY"},
			AllowFQDNs: []string{"api2.cursor.sh"},
			Command:    []string{"cursor-agent"},
		},
		OpencodeLocal: {
			Image:      registry + "opencode",
			EnvKeys:    []string{"ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENCODE_CONFIG_CONTENT", "OPENROUTER_API_KEY"},
			AllowFQDNs: []string{"api.anthropic.com", "api.openai.com", "models.dev", "models.opencode.ai", "openrouter.ai"},
			Command:    []string{"opencode"},
		},
		PiLocal: {
			Image:      registry + "pi",
			EnvKeys:    []string{"ANTHROPIC_API_KEY", "GEMINI_API_KEY", "OPENAI_API_KEY"},
			AllowFQDNs: []string{"api.anthropic.com", "api.openai.com", "generativelanguage.googleapis.com"},
			Command:    []string{"pi"},
		},
		AcpxLocal: {
			Image:      registry + "acpx",
			EnvKeys:    []string{"ANTHROPIC_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN", "GEMINI_API_KEY", "OPENAI_API_KEY"},
			AllowFQDNs: []string{"api.anthropic.com", "api.openai.com", "generativelanguage.googleapis.com"},
			Command:    []string{"acpx"},
		},
	}
}

// CheckedVersions names, per adapter type, the CLI release whose command line
// was checked to be accepted (see docs/adapters.md); cursor_local has no
// installable CLI here and was checked against published transcripts only.
func CheckedVersions() map[Type]string {
	return map[Type]string{
		ClaudeLocal:   "@anthropic-ai/claude-code 2.1.197",
		CodexLocal:    "@openai/codex 0.169.0",
		GeminiLocal:   "@google/gemini-cli 0.61.0",
		CursorLocal:   "cursor-agent 2026.08.11 (transcripts only)",
		OpencodeLocal: "opencode-ai 1.18.33",
		PiLocal:       "@mariozechner/pi-coding-agent 0.73.1",
		AcpxLocal:     "acpx 0.19.1",
	}
}
