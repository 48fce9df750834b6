package adapters

import (
	"encoding/json"
	"strconv"
	"strings"

	"github.com/pcsync/pcsync/pkg/result"
)

// acpx is the acpx Agent Client Protocol client, which drives an ACP agent
// (Invocation.Agent: claude, codex, gemini, …; acpx's default when empty).
// A new session runs as
//
//	acpx --format json --json-strict --approve-all [--model M]
//	     [--max-turns N] [extra args…] [AGENT] exec --file -          < prompt
//
// Resuming takes two acpx calls (register the ACP session under a name,
// then prompt it), so it runs through sh with the session id in the
// environment, never in the script text:
//
//	sh -c '"$@" sessions ensure --name "$S" --resume-session "$S" >&2 &&
//	       exec "$@" prompt --session "$S" --file -' acpx \
//	   acpx --format json … --ttl 1 [AGENT]                         < prompt
//
// --ttl 1 lets the session's queue owner exit right after the run. Extra
// args are acpx global options (e.g. --agent for a raw adapter command).
// acpx has no generic effort option; the instructions file is named in a
// preamble to the prompt.
type acpx struct{}

func (acpx) Type() Type { return AcpxLocal }

var acpxEnv = envRules{baseURLKeys: []string{envAnthropicBaseURL, envGeminiBaseURL, envOpenAIBaseURL}, bedrock: true}

func (acpx) ForwardEnvKeys(env map[string]string) []string { return acpxEnv.forwardKeys(env) }
func (acpx) EgressHosts(env map[string]string) []string    { return acpxEnv.egressHosts(env) }

// acpxSessionEnv carries the session id into the resume script.
const acpxSessionEnv = "PCSYNC_ACPX_SESSION"

const acpxResumeScript = `"$@" sessions ensure --name "$` + acpxSessionEnv + `" --resume-session "$` + acpxSessionEnv +
	`" >&2 && exec "$@" prompt --session "$` + acpxSessionEnv + `" --file -`

// Check implements Adapter.
func (acpx) Check(inv Invocation) error {
	if err := check(AcpxLocal, inv); err != nil {
		return err
	}
	if inv.Agent != "" && !agentPattern.MatchString(inv.Agent) {
		return invalid(AcpxLocal, FieldAgent, "agent %q is not an agent name", inv.Agent)
	}
	return nil
}

func (a acpx) Command(inv Invocation) (Command, error) {
	if err := a.Check(inv); err != nil {
		return Command{}, err
	}
	args := start(inv)
	var warnings []string
	args = append(args, "--format", "json", "--json-strict", "--approve-all")
	if inv.Model != "" {
		args = append(args, "--model", inv.Model)
	}
	if inv.MaxTurns > 0 {
		args = append(args, "--max-turns", strconv.Itoa(inv.MaxTurns))
	}
	if inv.Effort != "" {
		warnings = append(warnings, unsupported(AcpxLocal, "effort", "acpx has no effort option common to all agents"))
	}
	args = append(args, inv.ExtraArgs...)
	prompt := instructionsPreamble(inv.Prompt, inv.InstructionsFile)
	if inv.SessionID == "" {
		if inv.Agent != "" {
			args = append(args, inv.Agent)
		}
		args = append(args, "exec", "--file", "-")
		return finish(args, prompt, nil, inv, warnings), nil
	}
	args = append(args, "--ttl", "1")
	if inv.Agent != "" {
		args = append(args, inv.Agent)
	}
	script := append([]string{"sh", "-c", acpxResumeScript, "acpx"}, args...)
	return finish(script, prompt, map[string]string{acpxSessionEnv: inv.SessionID}, inv, warnings), nil
}

func (acpx) NewParser(opts ParserOptions) Parser {
	return &acpxParser{opts: opts, red: newRedactor(opts.Secrets), requests: map[string]string{}}
}

// acpxExits are acpx's documented exit codes.
var acpxExits = map[int]exitClass{
	1:   {"", "agent, protocol or runtime error"},
	2:   {"", "acpx usage error"},
	3:   {result.ErrTimeout, "acpx timeout"},
	4:   {result.ErrSessionNotFound, "no such session"},
	5:   {"", "permission denied"},
	130: {result.ErrCancelled, "interrupted"},
}

type acpxMessage struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params *struct {
		SessionID string `json:"sessionId"`
		Update    *struct {
			SessionUpdate string `json:"sessionUpdate"`
			Content       *struct {
				Type string `json:"type"`
				Text string `json:"text"`
			} `json:"content"`
			Cost *struct {
				Amount   float64 `json:"amount"`
				Currency string  `json:"currency"`
			} `json:"cost"`
		} `json:"update"`
	} `json:"params"`
	Result *struct {
		SessionID  string     `json:"sessionId"`
		StopReason string     `json:"stopReason"`
		Usage      *acpxUsage `json:"usage"`
	} `json:"result"`
	Error *struct {
		Code    int             `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	} `json:"error"`
}

type acpxUsage struct {
	TotalTokens       int64 `json:"totalTokens"`
	InputTokens       int64 `json:"inputTokens"`
	OutputTokens      int64 `json:"outputTokens"`
	ThoughtTokens     int64 `json:"thoughtTokens"`
	CachedReadTokens  int64 `json:"cachedReadTokens"`
	CachedWriteTokens int64 `json:"cachedWriteTokens"`
}

// usage maps ACP's usage, whose inclusiveness the protocol leaves open, by
// checking which reading makes totalTokens add up: cache counts inside
// inputTokens or beside it, thoughts inside outputTokens or beside it.
// Without a consistent total, counts are taken as separate (Anthropic style).
func (u acpxUsage) usage() result.Usage {
	in, out := u.InputTokens, u.OutputTokens
	cache := u.CachedReadTokens + u.CachedWriteTokens
	switch u.TotalTokens {
	case in + out + u.ThoughtTokens + cache:
		out += u.ThoughtTokens
	case in + out + cache:
		// thoughts counted in output
	case in + out + u.ThoughtTokens:
		in -= cache
		out += u.ThoughtTokens
	case in + out:
		in -= cache
	default:
		out += u.ThoughtTokens
	}
	return nonNegative(result.Usage{InputTokens: in, CachedInputTokens: u.CachedReadTokens,
		CacheCreationInputTokens: u.CachedWriteTokens, OutputTokens: out})
}

type acpxParser struct {
	opts ParserOptions
	red  redactor

	requests   map[string]string // request id → method, for acpx's own requests
	sessionID  string
	text       strings.Builder
	stopReason string
	promptDone bool
	errText    string
	code       result.ErrorCode
	usage      usageBuilder
	cost       *float64
	noise      noise
}

func (p *acpxParser) Feed(line []byte) {
	var m acpxMessage
	if !parseJSON(line, &m) {
		p.noise.add(line)
		return
	}
	id := string(m.ID)
	switch {
	case m.Method != "" && id != "" && id != "null":
		if len(p.requests) < 1024 {
			p.requests[id] = m.Method
		}
		if m.Params != nil && m.Params.SessionID != "" && (m.Method == "session/prompt" || m.Method == "session/load") {
			p.sessionID = m.Params.SessionID
		}
		if m.Method == "session/prompt" {
			p.text.Reset()
		}
	case m.Method == "session/update" && m.Params != nil:
		if m.Params.SessionID != "" {
			p.sessionID = m.Params.SessionID
		}
		p.update(m)
	case m.Result != nil:
		if m.Result.SessionID != "" {
			p.sessionID = m.Result.SessionID
		}
		if p.requests[id] == "session/prompt" || m.Result.StopReason != "" {
			p.promptDone = true
			p.stopReason = m.Result.StopReason
			if m.Result.Usage != nil {
				p.usage.add(m.Result.Usage.usage())
			}
		}
	case m.Error != nil:
		method := p.requests[id]
		// A failed session/load is retried by acpx with session/new; other
		// failures of acpx's own set-up calls end the run.
		if method == "session/load" {
			return
		}
		p.promptDone = true
		p.fail(m.Error.Code, m.Error.Message, m.Error.Data)
	}
}

func (p *acpxParser) update(m acpxMessage) {
	u := m.Params.Update
	if u == nil {
		return
	}
	switch u.SessionUpdate {
	case "agent_message_chunk":
		if u.Content != nil && u.Content.Type == "text" {
			p.text.WriteString(u.Content.Text)
		}
	case "usage_update":
		// The cost is the session's running total: it is this run's cost
		// only for a new session.
		if u.Cost != nil && strings.EqualFold(u.Cost.Currency, "USD") && p.opts.ResumedSessionID == "" && u.Cost.Amount >= 0 {
			c := u.Cost.Amount
			p.cost = &c
		}
	}
}

func (p *acpxParser) fail(code int, message string, data json.RawMessage) {
	var d struct {
		Details  string `json:"details"`
		AcpxCode string `json:"acpxCode"`
	}
	_ = json.Unmarshal(data, &d)
	text := strings.TrimSpace(firstNonEmpty(message, "JSON-RPC error "+strconv.Itoa(code)))
	if d.Details != "" && !strings.Contains(text, d.Details) {
		text += ": " + d.Details
	}
	p.errText = text
	switch {
	case d.AcpxCode == "NO_SESSION":
		p.code = result.ErrSessionNotFound
	case d.AcpxCode == "TIMEOUT":
		p.code = result.ErrTimeout
	case code == -32000: // ACP's "authentication required"
		p.code = result.ErrAuthRequired
	default:
		if c, ok := classifyText(text); ok {
			p.code = c
		}
	}
}

func (p *acpxParser) Finish(proc ProcessOutcome) Outcome {
	var o Outcome
	o.SessionID = strPtr(p.sessionID)
	o.Model = strPtr(p.opts.Model)
	o.Usage = p.usage.u
	if o.Usage != nil {
		o.UsageBasis = basisPtr(result.UsagePerRun)
	}
	o.CostUSD = p.cost
	v := verdict{cli: "acpx", needTerminal: true, terminal: p.promptDone, errText: p.errText, code: p.code,
		exitMeaning: acpxExits, notice: p.noise.last()}
	if p.errText == "" {
		switch p.stopReason {
		case "max_turn_requests":
			v.errText, v.code = "the agent reached its maximum number of turns (stopReason max_turn_requests)", result.ErrMaxTurns
		case "refusal":
			v.errText, v.code = "the agent refused to continue (stopReason refusal)", result.ErrAgentFailed
		case "cancelled":
			v.errText, v.code = "the agent cancelled the turn (stopReason cancelled)", result.ErrCancelled
		}
	}
	if p.promptDone && v.errText == "" {
		o.Summary = strPtr(p.text.String())
	}
	conclude(&o, v, proc, p.red)
	return o
}
