package adapters

import (
	"strings"

	"github.com/pcsync/pcsync/pkg/result"
)

// cursor is the Cursor CLI agent, run as
//
//	cursor-agent --print --output-format stream-json --trust --force
//	             [--model M] [--resume SID] [extra args…]          < prompt
//
// --force lets shell commands run unattended (without it they are
// "rejected"); --trust skips the workspace-trust prompt. The CLI has no
// flag for effort, turn limit or an instructions file; the last is named in
// a preamble to the prompt.
type cursor struct{}

func (cursor) Type() Type { return CursorLocal }

var cursorEnv = envRules{}

func (cursor) ForwardEnvKeys(env map[string]string) []string { return cursorEnv.forwardKeys(env) }
func (cursor) EgressHosts(env map[string]string) []string    { return cursorEnv.egressHosts(env) }

// Check implements Adapter.
func (cursor) Check(inv Invocation) error { return check(CursorLocal, inv) }

func (cursor) Command(inv Invocation) (Command, error) {
	if err := check(CursorLocal, inv); err != nil {
		return Command{}, err
	}
	args := start(inv)
	var warnings []string
	args = append(args, "--print", "--output-format", "stream-json", "--trust", "--force")
	if inv.Model != "" {
		args = append(args, "--model", inv.Model)
	}
	if inv.SessionID != "" {
		args = append(args, "--resume", inv.SessionID)
	}
	if inv.Effort != "" {
		warnings = append(warnings, unsupported(CursorLocal, "effort", "cursor-agent has no effort flag; pick a model variant instead"))
	}
	if inv.MaxTurns > 0 {
		warnings = append(warnings, unsupported(CursorLocal, "maxTurns", "cursor-agent has no turn limit"))
	}
	args = append(args, inv.ExtraArgs...)
	return finish(args, instructionsPreamble(inv.Prompt, inv.InstructionsFile), nil, inv, warnings), nil
}

func (cursor) NewParser(opts ParserOptions) Parser {
	return &cursorParser{opts: opts, red: newRedactor(opts.Secrets)}
}

type cursorEvent struct {
	Type      string `json:"type"`
	Subtype   string `json:"subtype"`
	SessionID string `json:"session_id"`
	Model     string `json:"model"`
	IsError   bool   `json:"is_error"`
	Result    string `json:"result"`
	Message   *struct {
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
	} `json:"message"`
	Usage *struct {
		InputTokens      int64 `json:"inputTokens"`
		OutputTokens     int64 `json:"outputTokens"`
		CacheReadTokens  int64 `json:"cacheReadTokens"`
		CacheWriteTokens int64 `json:"cacheWriteTokens"`
	} `json:"usage"`
	Error *struct {
		Message string `json:"message"`
	} `json:"error"`
}

type cursorParser struct {
	opts ParserOptions
	red  redactor

	sessionID, model   string
	lastText           string
	terminal, failed   bool
	resultText, errMsg string
	usage              usageBuilder
	noise              noise
}

func (p *cursorParser) Feed(line []byte) {
	var ev cursorEvent
	if !parseJSON(line, &ev) {
		p.noise.add(line)
		return
	}
	if ev.SessionID != "" && (p.sessionID == "" || ev.Type == "result") {
		p.sessionID = ev.SessionID
	}
	switch ev.Type {
	case "system":
		if ev.Subtype == "init" && ev.Model != "" {
			p.model = ev.Model
		}
	case "assistant":
		if ev.Message != nil {
			var b strings.Builder
			for _, c := range ev.Message.Content {
				if c.Type == "text" {
					b.WriteString(c.Text)
				}
			}
			if b.Len() > 0 {
				p.lastText = b.String()
			}
		}
	case "error":
		if ev.Error != nil && ev.Error.Message != "" {
			p.errMsg = ev.Error.Message
		}
	case "result":
		p.terminal = true
		p.resultText = strings.TrimSpace(ev.Result)
		p.failed = ev.IsError || (ev.Subtype != "" && ev.Subtype != "success")
		if u := ev.Usage; u != nil {
			// Cursor reports cache reads and writes beside inputTokens.
			p.usage.set(result.Usage{InputTokens: u.InputTokens, CachedInputTokens: u.CacheReadTokens,
				CacheCreationInputTokens: u.CacheWriteTokens, OutputTokens: u.OutputTokens})
		}
	}
}

func (p *cursorParser) Finish(proc ProcessOutcome) Outcome {
	var o Outcome
	o.SessionID = strPtr(p.sessionID)
	o.Model = strPtr(firstNonEmpty(p.model, p.opts.Model))
	o.Usage = p.usage.u
	if o.Usage != nil {
		o.UsageBasis = basisPtr(result.UsagePerRun)
	}
	if p.terminal && !p.failed {
		o.Summary = strPtr(firstNonEmpty(p.resultText, p.lastText))
	}
	v := verdict{cli: "cursor-agent", needTerminal: true, terminal: p.terminal, failed: p.failed,
		notice: firstNonEmpty(p.errMsg, p.noise.last())}
	if p.failed {
		v.errText = firstNonEmpty(p.resultText, p.errMsg, "the result event reports an error")
	}
	conclude(&o, v, proc, p.red)
	return o
}
