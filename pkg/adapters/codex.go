package adapters

import (
	"slices"
	"strconv"
	"strings"

	"github.com/pcsync/pcsync/pkg/result"
)

// codex is the OpenAI Codex CLI, run as
//
//	codex exec --json --skip-git-repo-check
//	      --dangerously-bypass-approvals-and-sandbox [-m M]
//	      [-c model_reasoning_effort="E"] [extra args…] [resume SID] -  < prompt
//
// (and -c openai_base_url="U" after exec when the run's env sets
// OPENAI_BASE_URL=U: WithBaseURL).
//
// "-" makes codex read the prompt from stdin (with a prompt argument and an
// open stdin it would wait for more input). Options go before "resume". The
// instructions file is named in a preamble to the prompt: codex's
// model_instructions_file would replace its built-in instructions instead of
// adding to them. Codex has no turn limit.
type codex struct{}

func (codex) Type() Type { return CodexLocal }

var codexEnv = envRules{baseURLKeys: []string{envOpenAIBaseURL}}

func (codex) ForwardEnvKeys(env map[string]string) []string { return codexEnv.forwardKeys(env) }
func (codex) EgressHosts(env map[string]string) []string    { return codexEnv.egressHosts(env) }

// Check implements Adapter.
func (codex) Check(inv Invocation) error { return check(CodexLocal, inv) }

func (codex) Command(inv Invocation) (Command, error) {
	if err := check(CodexLocal, inv); err != nil {
		return Command{}, err
	}
	args := start(inv)
	var warnings []string
	args = append(args, "exec", "--json", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox")
	if inv.Model != "" {
		args = append(args, "-m", inv.Model)
	}
	if inv.Effort != "" {
		args = append(args, "-c", `model_reasoning_effort="`+inv.Effort+`"`)
	}
	if inv.MaxTurns > 0 {
		warnings = append(warnings, unsupported(CodexLocal, "maxTurns", "codex exec has no turn limit"))
	}
	args = append(args, inv.ExtraArgs...)
	if inv.SessionID != "" {
		args = append(args, "resume", inv.SessionID)
	}
	args = append(args, "-")
	return finish(args, instructionsPreamble(inv.Prompt, inv.InstructionsFile), nil, inv, warnings), nil
}

func (codex) NewParser(opts ParserOptions) Parser {
	return &codexParser{opts: opts, red: newRedactor(opts.Secrets)}
}

type codexEvent struct {
	Type     string `json:"type"`
	ThreadID string `json:"thread_id"`
	Message  string `json:"message"`
	Item     *struct {
		Type  string `json:"type"`
		Text  string `json:"text"`
		Phase string `json:"phase"`
	} `json:"item"`
	Usage *struct {
		InputTokens       int64 `json:"input_tokens"`
		CachedInputTokens int64 `json:"cached_input_tokens"`
		OutputTokens      int64 `json:"output_tokens"`
	} `json:"usage"`
	Error *struct {
		Message string `json:"message"`
	} `json:"error"`
}

type codexParser struct {
	opts ParserOptions
	red  redactor

	threadID               string
	lastMessage, finalText string
	completed, failed      bool
	failMsg, lastError     string
	usage                  *result.Usage // normalised session total
	noise                  noise
}

func (p *codexParser) Feed(line []byte) {
	var ev codexEvent
	if !parseJSON(line, &ev) {
		p.noise.add(line)
		return
	}
	switch ev.Type {
	case "thread.started":
		if ev.ThreadID != "" {
			p.threadID = ev.ThreadID
		}
	case "item.completed":
		if ev.Item != nil && ev.Item.Type == "agent_message" {
			p.lastMessage = ev.Item.Text
			if ev.Item.Phase == "final_answer" {
				p.finalText = ev.Item.Text
			}
		}
	case "turn.completed":
		p.completed = true
		if ev.Usage != nil {
			// input_tokens counts cached input too.
			u := nonNegative(result.Usage{
				InputTokens:       ev.Usage.InputTokens - ev.Usage.CachedInputTokens,
				CachedInputTokens: ev.Usage.CachedInputTokens,
				OutputTokens:      ev.Usage.OutputTokens,
			})
			p.usage = &u
		}
	case "turn.failed":
		p.failed = true
		if ev.Error != nil {
			p.failMsg = ev.Error.Message
		}
	case "error":
		// Also used for retry notices ("Reconnecting... 2/5 (...)").
		if ev.Message != "" {
			p.lastError = ev.Message
		}
	}
}

func (p *codexParser) Finish(proc ProcessOutcome) Outcome {
	var o Outcome
	o.SessionID = strPtr(p.threadID)
	o.Model = strPtr(p.opts.Model)
	if p.usage != nil {
		total := *p.usage
		o.SessionCumulativeUsage = &total
		o.Usage, o.UsageBasis = codexRunUsage(total, p.opts)
	}
	if p.completed && !p.failed {
		o.Summary = strPtr(firstNonEmpty(p.finalText, p.lastMessage))
	}
	v := verdict{cli: "codex", needTerminal: true, terminal: p.completed || p.failed,
		notice: firstNonEmpty(p.lastError, p.noise.last())}
	if p.failed {
		v.failed = true
		v.errText = firstNonEmpty(p.failMsg, strings.TrimSpace(p.lastError), "the turn failed")
	}
	conclude(&o, v, proc, p.red)
	return o
}

// codexRunUsage turns a thread total into this run's usage: a new thread's
// total is the run's; a resumed thread's run is the difference from the
// previous total when that is known, else the total is reported as
// session_cumulative.
func codexRunUsage(total result.Usage, opts ParserOptions) (*result.Usage, *result.UsageBasis) {
	if opts.ResumedSessionID == "" {
		return &total, basisPtr(result.UsagePerRun)
	}
	if prev := opts.PreviousUsage; prev != nil {
		d := result.Usage{
			InputTokens:              total.InputTokens - prev.InputTokens,
			CachedInputTokens:        total.CachedInputTokens - prev.CachedInputTokens,
			CacheCreationInputTokens: total.CacheCreationInputTokens - prev.CacheCreationInputTokens,
			OutputTokens:             total.OutputTokens - prev.OutputTokens,
		}
		if d.InputTokens >= 0 && d.CachedInputTokens >= 0 && d.CacheCreationInputTokens >= 0 && d.OutputTokens >= 0 {
			return &d, basisPtr(result.UsagePerRun)
		}
		// The totals went down (a different thread, or history compacted):
		// the previous total does not apply.
	}
	return &total, basisPtr(result.UsageSessionCumulative)
}

// WithBaseURL returns argv with the options that point t's CLI at the
// base URL in env when the CLI does not read it from its environment.
// Codex (0.169) takes its OpenAI base URL from its config's
// openai_base_url only, never from OPENAI_BASE_URL: for a codex argv with
// the exec subcommand and OPENAI_BASE_URL in env, `-c openai_base_url=…`
// is added after "exec", unless argv sets it already. Any other argv is
// returned as it is.
func WithBaseURL(t Type, argv []string, env map[string]string) []string {
	base := env[envOpenAIBaseURL]
	if t != CodexLocal || base == "" {
		return argv
	}
	at := slices.Index(argv, "exec")
	if at < 0 || slices.ContainsFunc(argv, func(a string) bool { return strings.Contains(a, "openai_base_url") }) {
		return argv
	}
	out := make([]string, 0, len(argv)+2)
	out = append(out, argv[:at+1]...)
	out = append(out, "-c", "openai_base_url="+strconv.Quote(base))
	return append(out, argv[at+1:]...)
}

// CodexSystemConfigDir is the directory of codex's system config
// (config.toml), read below the user's own.
const CodexSystemConfigDir = "/etc/codex"

// CodexSystemConfig is a codex system config.toml that points codex at
// env's OPENAI_BASE_URL; nil when env sets none. It serves commands whose
// argv pcsync cannot extend (Paperclip runs a lease's CLI inside a shell
// script of its own).
func CodexSystemConfig(env map[string]string) []byte {
	base := env[envOpenAIBaseURL]
	if base == "" {
		return nil
	}
	return []byte("# Written by pcsync: the tenant's egress proxy route.\nopenai_base_url = " + strconv.Quote(base) + "\n")
}
