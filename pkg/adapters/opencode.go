package adapters

import (
	"strings"

	"github.com/pcsync/pcsync/pkg/result"
)

// opencode is OpenCode, run as
//
//	opencode run --format json --auto --print-logs --log-level ERROR
//	         [-m provider/model] [--variant E] [-s SID] [extra args…]  < prompt
//
// With no message argument, run takes the message from stdin. --auto
// approves permission requests (newer builds reject them in `run`
// otherwise). Errors on stdout can be as vague as "Unexpected server error",
// so the error log goes to stderr, where the cause (e.g.
// ProviderModelNotFoundError) shows. OpenCode has no turn limit and no
// instructions-file flag; the file is named in a preamble to the prompt.
type opencode struct{}

func (opencode) Type() Type { return OpencodeLocal }

var opencodeEnv = envRules{}

func (opencode) ForwardEnvKeys(env map[string]string) []string { return opencodeEnv.forwardKeys(env) }
func (opencode) EgressHosts(env map[string]string) []string    { return opencodeEnv.egressHosts(env) }

// Check implements Adapter.
func (opencode) Check(inv Invocation) error { return check(OpencodeLocal, inv) }

func (opencode) Command(inv Invocation) (Command, error) {
	if err := check(OpencodeLocal, inv); err != nil {
		return Command{}, err
	}
	args := start(inv)
	var warnings []string
	args = append(args, "run", "--format", "json", "--auto", "--print-logs", "--log-level", "ERROR")
	if inv.Model != "" {
		args = append(args, "-m", inv.Model)
	}
	if inv.Effort != "" {
		args = append(args, "--variant", inv.Effort)
	}
	if inv.SessionID != "" {
		args = append(args, "-s", inv.SessionID)
	}
	if inv.MaxTurns > 0 {
		warnings = append(warnings, unsupported(OpencodeLocal, "maxTurns", "opencode run has no turn limit"))
	}
	args = append(args, inv.ExtraArgs...)
	return finish(args, instructionsPreamble(inv.Prompt, inv.InstructionsFile), nil, inv, warnings), nil
}

func (opencode) NewParser(opts ParserOptions) Parser {
	return &opencodeParser{opts: opts, red: newRedactor(opts.Secrets), texts: map[string][]string{}}
}

type opencodeEvent struct {
	Type      string `json:"type"`
	SessionID string `json:"sessionID"`
	Part      *struct {
		MessageID string   `json:"messageID"`
		Text      string   `json:"text"`
		Reason    string   `json:"reason"`
		Cost      *float64 `json:"cost"`
		Tokens    *struct {
			Input     int64 `json:"input"`
			Output    int64 `json:"output"`
			Reasoning int64 `json:"reasoning"`
			Cache     struct {
				Read  int64 `json:"read"`
				Write int64 `json:"write"`
			} `json:"cache"`
		} `json:"tokens"`
	} `json:"part"`
	Error *struct {
		Name string `json:"name"`
		Data struct {
			Message    string `json:"message"`
			StatusCode int    `json:"statusCode"`
		} `json:"data"`
	} `json:"error"`
}

type opencodeParser struct {
	opts ParserOptions
	red  redactor

	sessionID string
	texts     map[string][]string // text parts per message id
	lastMsg   string
	steps     int
	usage     usageBuilder
	cost      costBuilder
	errText   string
	code      result.ErrorCode
	noise     noise
}

func (p *opencodeParser) Feed(line []byte) {
	var ev opencodeEvent
	if !parseJSON(line, &ev) {
		p.noise.add(line)
		return
	}
	if ev.SessionID != "" {
		p.sessionID = ev.SessionID
	}
	switch ev.Type {
	case "text":
		if ev.Part != nil && ev.Part.Text != "" {
			if _, seen := p.texts[ev.Part.MessageID]; !seen && len(p.texts) >= 64 {
				clear(p.texts) // only the last message matters; bound memory
			}
			p.texts[ev.Part.MessageID] = append(p.texts[ev.Part.MessageID], ev.Part.Text)
			p.lastMsg = ev.Part.MessageID
		}
	case "step_finish":
		p.steps++
		if ev.Part == nil {
			return
		}
		if t := ev.Part.Tokens; t != nil {
			// input excludes cache reads; reasoning is output.
			p.usage.add(result.Usage{InputTokens: t.Input, CachedInputTokens: t.Cache.Read,
				CacheCreationInputTokens: t.Cache.Write, OutputTokens: t.Output + t.Reasoning})
		}
		if ev.Part.Cost != nil {
			p.cost.add(*ev.Part.Cost)
		}
	case "error":
		if ev.Error == nil {
			p.errText = "the run reported an error"
			return
		}
		e := ev.Error
		p.errText = strings.TrimSpace(firstNonEmpty(e.Data.Message, e.Name, "the run reported an error"))
		if e.Name != "" && e.Name != "UnknownError" && !strings.Contains(p.errText, e.Name) {
			p.errText = e.Name + ": " + p.errText
		}
		p.code = opencodeCode(e.Name, e.Data.StatusCode)
	}
}

// opencodeCode maps OpenCode's error names and provider status codes.
func opencodeCode(name string, status int) result.ErrorCode {
	switch {
	case name == "ProviderAuthError" || status == 401 || status == 403:
		return result.ErrAuthRequired
	case name == "ProviderModelNotFoundError" || status == 404:
		return result.ErrModelNotFound
	case status == 429:
		return result.ErrRateLimited
	case status >= 500:
		return result.ErrUpstreamUnavailable
	}
	return ""
}

func (p *opencodeParser) Finish(proc ProcessOutcome) Outcome {
	var o Outcome
	o.SessionID = strPtr(p.sessionID)
	o.Model = strPtr(p.opts.Model)
	o.Usage = p.usage.u
	if o.Usage != nil {
		o.UsageBasis = basisPtr(result.UsagePerRun)
	}
	o.CostUSD = p.cost.c
	if p.steps > 0 {
		n := p.steps
		o.NumTurns = &n
	}
	if p.lastMsg != "" || len(p.texts) > 0 {
		o.Summary = strPtr(strings.Join(p.texts[p.lastMsg], "\n"))
	}
	v := verdict{cli: "opencode", errText: p.errText, code: p.code, notice: p.noise.last()}
	conclude(&o, v, proc, p.red)
	return o
}
