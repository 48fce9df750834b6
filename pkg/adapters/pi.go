package adapters

import (
	"strings"

	"github.com/pcsync/pcsync/pkg/result"
)

// pi is the pi coding agent, run as
//
//	pi --mode json --print [--model [provider/]M] [--thinking E]
//	   [--session SID] [--append-system-prompt F] [extra args…]   < prompt
//
// In print mode pi reads the prompt from stdin. --append-system-prompt
// takes a file's contents when given a path. pi has no turn limit. It exits
// 0 even when the model call failed, so failure is read from the stream.
type pi struct{}

func (pi) Type() Type { return PiLocal }

var piEnv = envRules{}

func (pi) ForwardEnvKeys(env map[string]string) []string { return piEnv.forwardKeys(env) }
func (pi) EgressHosts(env map[string]string) []string    { return piEnv.egressHosts(env) }

// Check implements Adapter.
func (pi) Check(inv Invocation) error { return check(PiLocal, inv) }

func (pi) Command(inv Invocation) (Command, error) {
	if err := check(PiLocal, inv); err != nil {
		return Command{}, err
	}
	args := start(inv)
	var warnings []string
	args = append(args, "--mode", "json", "--print")
	if inv.Model != "" {
		args = append(args, "--model", inv.Model)
	}
	if inv.Effort != "" {
		args = append(args, "--thinking", inv.Effort)
	}
	if inv.SessionID != "" {
		args = append(args, "--session", inv.SessionID)
	}
	if inv.InstructionsFile != "" {
		args = append(args, "--append-system-prompt", inv.InstructionsFile)
	}
	if inv.MaxTurns > 0 {
		warnings = append(warnings, unsupported(PiLocal, "maxTurns", "pi has no turn limit"))
	}
	args = append(args, inv.ExtraArgs...)
	return finish(args, inv.Prompt, nil, inv, warnings), nil
}

func (pi) NewParser(opts ParserOptions) Parser {
	return &piParser{opts: opts, red: newRedactor(opts.Secrets)}
}

type piMessage struct {
	Role    string `json:"role"`
	Model   string `json:"model"`
	Content []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
	Usage *struct {
		Input      int64 `json:"input"`
		Output     int64 `json:"output"`
		CacheRead  int64 `json:"cacheRead"`
		CacheWrite int64 `json:"cacheWrite"`
		Cost       *struct {
			Total *float64 `json:"total"`
		} `json:"cost"`
	} `json:"usage"`
	StopReason   string `json:"stopReason"`
	ErrorMessage string `json:"errorMessage"`
}

type piEvent struct {
	Type       string     `json:"type"`
	ID         string     `json:"id"`
	Message    *piMessage `json:"message"`
	Success    *bool      `json:"success"`
	FinalError string     `json:"finalError"`
}

type piParser struct {
	opts ParserOptions
	red  redactor

	sessionID, model string
	lastText         string
	pendingErr       string // the last assistant message failed, no retry has succeeded since
	turns            int
	usage            usageBuilder
	cost             costBuilder
	noise            noise
}

func (p *piParser) Feed(line []byte) {
	var ev piEvent
	if !parseJSON(line, &ev) {
		p.noise.add(line)
		return
	}
	switch ev.Type {
	case "session":
		if ev.ID != "" {
			p.sessionID = ev.ID
		}
	case "turn_end":
		p.turns++
	case "message_end":
		m := ev.Message
		if m == nil || m.Role != "assistant" {
			return
		}
		if m.Model != "" {
			p.model = m.Model
		}
		if u := m.Usage; u != nil {
			// input excludes cache reads.
			p.usage.add(result.Usage{InputTokens: u.Input, CachedInputTokens: u.CacheRead,
				CacheCreationInputTokens: u.CacheWrite, OutputTokens: u.Output})
			if u.Cost != nil && u.Cost.Total != nil {
				p.cost.add(*u.Cost.Total)
			}
		}
		switch m.StopReason {
		case "error", "aborted":
			p.pendingErr = firstNonEmpty(m.ErrorMessage, "the model call ended with stopReason "+m.StopReason)
		default:
			p.pendingErr = ""
			var b strings.Builder
			for _, c := range m.Content {
				if c.Type == "text" {
					b.WriteString(c.Text)
				}
			}
			if s := strings.TrimSpace(b.String()); s != "" {
				p.lastText = s
			}
		}
	case "auto_retry_end":
		if ev.Success != nil && *ev.Success {
			p.pendingErr = ""
		} else if ev.FinalError != "" {
			p.pendingErr = ev.FinalError
		}
	}
}

func (p *piParser) Finish(proc ProcessOutcome) Outcome {
	var o Outcome
	o.SessionID = strPtr(p.sessionID)
	o.Model = strPtr(firstNonEmpty(p.model, p.opts.Model))
	o.Usage = p.usage.u
	if o.Usage != nil {
		o.UsageBasis = basisPtr(result.UsagePerRun)
	}
	o.CostUSD = p.cost.c
	if p.turns > 0 {
		n := p.turns
		o.NumTurns = &n
	}
	o.Summary = strPtr(p.lastText)
	v := verdict{cli: "pi", errText: p.pendingErr, notice: p.noise.last()}
	conclude(&o, v, proc, p.red)
	return o
}
