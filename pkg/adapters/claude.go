package adapters

import (
	"encoding/json"
	"sort"
	"strconv"
	"strings"

	"github.com/pcsync/pcsync/pkg/result"
)

// claude is Claude Code, run as
//
//	claude --print --output-format stream-json --verbose
//	       --dangerously-skip-permissions [--model M] [--effort E]
//	       [--max-turns N] [--resume SID] [--append-system-prompt-file F]
//	       [extra args…]                                   < prompt
//
// --verbose is required by --print with stream-json. Skipping permission
// prompts as root is refused unless IS_SANDBOX=1, which pcsync sets (agents
// run in a sandbox: a pod or a dedicated work dir).
type claude struct{}

func (claude) Type() Type { return ClaudeLocal }

var claudeEnv = envRules{baseURLKeys: []string{envAnthropicBaseURL}, bedrock: true}

func (claude) ForwardEnvKeys(env map[string]string) []string { return claudeEnv.forwardKeys(env) }
func (claude) EgressHosts(env map[string]string) []string    { return claudeEnv.egressHosts(env) }

// Check implements Adapter.
func (claude) Check(inv Invocation) error { return check(ClaudeLocal, inv) }

func (claude) Command(inv Invocation) (Command, error) {
	if err := check(ClaudeLocal, inv); err != nil {
		return Command{}, err
	}
	args := start(inv)
	args = append(args, "--print", "--output-format", "stream-json", "--verbose", "--dangerously-skip-permissions")
	if inv.Model != "" {
		args = append(args, "--model", inv.Model)
	}
	if inv.Effort != "" {
		args = append(args, "--effort", inv.Effort)
	}
	if inv.MaxTurns > 0 {
		args = append(args, "--max-turns", strconv.Itoa(inv.MaxTurns))
	}
	if inv.SessionID != "" {
		args = append(args, "--resume", inv.SessionID)
	}
	if inv.InstructionsFile != "" {
		args = append(args, "--append-system-prompt-file", inv.InstructionsFile)
	}
	args = append(args, inv.ExtraArgs...)
	env := map[string]string{
		"IS_SANDBOX": "1",
		// No telemetry, error reporting or auto-update: egress is limited
		// to the model API.
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
	}
	return finish(args, inv.Prompt, env, inv, nil), nil
}

func (claude) NewParser(opts ParserOptions) Parser {
	return &claudeParser{opts: opts, red: newRedactor(opts.Secrets), msgUsage: map[string]result.Usage{}}
}

type claudeUsage struct {
	InputTokens              int64 `json:"input_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
	OutputTokens             int64 `json:"output_tokens"`
}

func (u claudeUsage) usage() result.Usage {
	return result.Usage{InputTokens: u.InputTokens, CachedInputTokens: u.CacheReadInputTokens,
		CacheCreationInputTokens: u.CacheCreationInputTokens, OutputTokens: u.OutputTokens}
}

type claudeModelUsage struct {
	InputTokens              int64    `json:"inputTokens"`
	OutputTokens             int64    `json:"outputTokens"`
	CacheReadInputTokens     int64    `json:"cacheReadInputTokens"`
	CacheCreationInputTokens int64    `json:"cacheCreationInputTokens"`
	CostUSD                  *float64 `json:"costUSD"`
}

type claudeEvent struct {
	Type      string `json:"type"`
	Subtype   string `json:"subtype"`
	SessionID string `json:"session_id"`
	Model     string `json:"model"`
	Message   *struct {
		ID      string       `json:"id"`
		Model   string       `json:"model"`
		Usage   *claudeUsage `json:"usage"`
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
	} `json:"message"`
	Error          string                      `json:"error"`
	IsError        *bool                       `json:"is_error"`
	Result         *string                     `json:"result"`
	NumTurns       *int                        `json:"num_turns"`
	TotalCostUSD   *float64                    `json:"total_cost_usd"`
	Usage          *claudeUsage                `json:"usage"`
	ModelUsage     map[string]claudeModelUsage `json:"modelUsage"`
	Errors         []json.RawMessage           `json:"errors"`
	TerminalReason string                      `json:"terminal_reason"`
	APIErrorStatus *int                        `json:"api_error_status"`
	RateLimitInfo  *struct {
		Status string `json:"status"`
	} `json:"rate_limit_info"`
}

type claudeParser struct {
	opts ParserOptions
	red  redactor

	sessionID, initModel, msgModel string
	msgUsage                       map[string]result.Usage // last usage per assistant message id
	msgOrder                       []string
	assistantErr, assistantText    string
	rateLimited                    bool
	res                            *claudeEvent
	noise                          noise
}

func (p *claudeParser) Feed(line []byte) {
	var ev claudeEvent
	if !parseJSON(line, &ev) {
		p.noise.add(line)
		return
	}
	if ev.SessionID != "" && p.sessionID == "" {
		p.sessionID = ev.SessionID
	}
	switch ev.Type {
	case "system":
		if ev.Subtype == "init" {
			if ev.SessionID != "" {
				p.sessionID = ev.SessionID
			}
			if ev.Model != "" {
				p.initModel = ev.Model
			}
		}
	case "assistant":
		if ev.Message == nil {
			return
		}
		m := ev.Message
		if p.msgModel == "" && m.Model != "" && m.Model != "<synthetic>" {
			p.msgModel = m.Model
		}
		if m.Usage != nil && m.ID != "" {
			if _, seen := p.msgUsage[m.ID]; !seen {
				p.msgOrder = append(p.msgOrder, m.ID)
			}
			p.msgUsage[m.ID] = m.Usage.usage()
		}
		if ev.Error != "" {
			p.assistantErr = ev.Error
			for _, c := range m.Content {
				if c.Type == "text" && c.Text != "" {
					p.assistantText = c.Text
				}
			}
		}
	case "rate_limit_event":
		if ev.RateLimitInfo != nil && ev.RateLimitInfo.Status == "rejected" {
			p.rateLimited = true
		}
	case "result":
		r := ev
		p.res = &r
		if ev.SessionID != "" {
			p.sessionID = ev.SessionID
		}
	}
}

func (p *claudeParser) Finish(proc ProcessOutcome) Outcome {
	var o Outcome
	o.SessionID = strPtr(p.sessionID)
	o.Model = strPtr(firstNonEmpty(p.initModel, p.msgModel, p.resultModel(), p.opts.Model))
	var ub usageBuilder
	v := verdict{cli: "claude", needTerminal: true, notice: firstNonEmpty(p.assistantText, p.noise.last())}
	if r := p.res; r != nil {
		v.terminal = true
		o.CostUSD = r.TotalCostUSD
		o.NumTurns = r.NumTurns
		switch {
		case len(r.ModelUsage) > 0:
			// The result's usage covers the main model only; subagents
			// (other models) are in modelUsage.
			for _, m := range sortedKeys(r.ModelUsage) {
				mu := r.ModelUsage[m]
				ub.add(result.Usage{InputTokens: mu.InputTokens, CachedInputTokens: mu.CacheReadInputTokens,
					CacheCreationInputTokens: mu.CacheCreationInputTokens, OutputTokens: mu.OutputTokens})
			}
		case r.Usage != nil:
			ub.set(r.Usage.usage())
		}
		isError := (r.IsError != nil && *r.IsError) || (r.Subtype != "" && r.Subtype != "success")
		text := ""
		if r.Result != nil {
			text = strings.TrimSpace(*r.Result)
		}
		if isError {
			v.failed = true
			v.errText = firstNonEmpty(text, joinErrors(r.Errors), p.assistantText, r.Subtype, "the result event reports an error")
			v.code = p.classify(r, v.errText)
		} else {
			o.Summary = strPtr(text)
		}
	}
	if ub.u == nil && len(p.msgOrder) > 0 {
		// No final accounting (an old CLI, or the stream was cut): sum
		// what each assistant message reported, last snapshot per message.
		for _, id := range p.msgOrder {
			ub.add(p.msgUsage[id])
		}
	}
	o.Usage = ub.u
	if o.Usage != nil {
		o.UsageBasis = basisPtr(result.UsagePerRun)
	}
	if v.errText == "" && p.assistantErr != "" && p.res == nil {
		v.notice = firstNonEmpty(p.assistantText, p.assistantErr)
	}
	conclude(&o, v, proc, p.red)
	return o
}

// classify picks the error code of a failed result: its subtype first, then
// the text, then the structured hints the stream carried.
func (p *claudeParser) classify(r *claudeEvent, text string) result.ErrorCode {
	switch {
	case r.Subtype == "error_max_turns" || r.TerminalReason == "max_turns":
		return result.ErrMaxTurns
	case r.Subtype == "error_max_budget_usd":
		return result.ErrQuotaExceeded
	}
	if c, ok := classifyText(text); ok {
		return c
	}
	switch p.assistantErr {
	case "authentication_failed":
		return result.ErrAuthRequired
	case "billing_error":
		return result.ErrQuotaExceeded
	case "rate_limit":
		return result.ErrRateLimited
	case "server_error":
		return result.ErrUpstreamUnavailable
	}
	if s := r.APIErrorStatus; s != nil {
		switch {
		case *s == 401 || *s == 403:
			return result.ErrAuthRequired
		case *s == 404:
			return result.ErrModelNotFound
		case *s == 429:
			return result.ErrRateLimited
		case *s >= 500:
			return result.ErrUpstreamUnavailable
		}
	}
	if p.rateLimited {
		return result.ErrQuotaExceeded
	}
	return ""
}

// resultModel names the model from modelUsage: the only one, or the one
// that cost the most.
func (p *claudeParser) resultModel() string {
	if p.res == nil || len(p.res.ModelUsage) == 0 {
		return ""
	}
	best, bestCost := "", -1.0
	for _, m := range sortedKeys(p.res.ModelUsage) {
		c := 0.0
		if mu := p.res.ModelUsage[m]; mu.CostUSD != nil {
			c = *mu.CostUSD
		}
		if c > bestCost {
			best, bestCost = m, c
		}
	}
	return best
}

// joinErrors renders a result's errors list (strings or objects).
func joinErrors(raw []json.RawMessage) string {
	var parts []string
	for _, r := range raw {
		var s string
		if json.Unmarshal(r, &s) == nil {
			parts = append(parts, s)
			continue
		}
		var obj struct {
			Message string `json:"message"`
		}
		if json.Unmarshal(r, &obj) == nil && obj.Message != "" {
			parts = append(parts, obj.Message)
		}
	}
	return strings.Join(parts, "; ")
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
