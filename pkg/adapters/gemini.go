package adapters

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/pcsync/pcsync/pkg/result"
)

// gemini is the Gemini CLI, run as
//
//	gemini --output-format stream-json --yolo --skip-trust [-m M]
//	       [--resume SID] [extra args…] -p ""                    < prompt
//
// -p makes the run headless and its value is appended to stdin, so an empty
// -p delivers the whole prompt on stdin. --skip-trust keeps --yolo in force
// in a folder the CLI has never seen (it would otherwise fall back to asking
// for approval). Gemini CLI has no flag for effort, turn limit or an
// instructions file; the last is named in a preamble to the prompt.
type gemini struct{}

func (gemini) Type() Type { return GeminiLocal }

var geminiEnv = envRules{baseURLKeys: []string{envGeminiBaseURL}}

func (gemini) ForwardEnvKeys(env map[string]string) []string { return geminiEnv.forwardKeys(env) }
func (gemini) EgressHosts(env map[string]string) []string    { return geminiEnv.egressHosts(env) }

// Check implements Adapter.
func (gemini) Check(inv Invocation) error { return check(GeminiLocal, inv) }

func (gemini) Command(inv Invocation) (Command, error) {
	if err := check(GeminiLocal, inv); err != nil {
		return Command{}, err
	}
	args := start(inv)
	var warnings []string
	args = append(args, "--output-format", "stream-json", "--yolo", "--skip-trust")
	if inv.Model != "" {
		args = append(args, "-m", inv.Model)
	}
	if inv.SessionID != "" {
		args = append(args, "--resume", inv.SessionID)
	}
	if inv.Effort != "" {
		warnings = append(warnings, unsupported(GeminiLocal, "effort", "gemini has no effort flag"))
	}
	if inv.MaxTurns > 0 {
		warnings = append(warnings, unsupported(GeminiLocal, "maxTurns", "gemini takes maxSessionTurns from settings.json only"))
	}
	args = append(args, inv.ExtraArgs...)
	args = append(args, "-p", "")
	return finish(args, instructionsPreamble(inv.Prompt, inv.InstructionsFile), nil, inv, warnings), nil
}

func (gemini) NewParser(opts ParserOptions) Parser {
	return &geminiParser{opts: opts, red: newRedactor(opts.Secrets)}
}

// geminiExits are the Gemini CLI's documented exit codes.
var geminiExits = map[int]exitClass{
	41:  {result.ErrAuthRequired, "authentication error"},
	42:  {"", "input error"},
	44:  {"", "sandbox error"},
	52:  {"", "configuration error"},
	53:  {result.ErrMaxTurns, "turn limit reached"},
	54:  {"", "fatal tool error"},
	55:  {"", "untrusted workspace"},
	130: {result.ErrCancelled, "interrupted"},
}

type geminiError struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

type geminiStats struct {
	TotalTokens  *int64 `json:"total_tokens"`
	InputTokens  *int64 `json:"input_tokens"`
	OutputTokens *int64 `json:"output_tokens"`
	Cached       *int64 `json:"cached"`
	Input        *int64 `json:"input"`
	Models       map[string]struct {
		TotalTokens int64 `json:"total_tokens"`
	} `json:"models"`
}

type geminiEvent struct {
	Type      string          `json:"type"`
	SessionID string          `json:"session_id"`
	Model     string          `json:"model"`
	Role      string          `json:"role"`
	Content   string          `json:"content"`
	Delta     bool            `json:"delta"`
	Severity  string          `json:"severity"`
	Message   string          `json:"message"`
	Status    string          `json:"status"`
	Error     json.RawMessage `json:"error"`
	Stats     *geminiStats    `json:"stats"`
}

// geminiJSONDoc is the single object of --output-format json.
type geminiJSONDoc struct {
	SessionID string          `json:"session_id"`
	Response  *string         `json:"response"`
	Error     json.RawMessage `json:"error"`
	Stats     *struct {
		Models map[string]struct {
			Tokens struct {
				Prompt     int64 `json:"prompt"`
				Candidates int64 `json:"candidates"`
				Total      int64 `json:"total"`
				Cached     int64 `json:"cached"`
				Thoughts   int64 `json:"thoughts"`
				Tool       int64 `json:"tool"`
			} `json:"tokens"`
		} `json:"models"`
	} `json:"stats"`
}

// maxJSONDoc bounds the buffer for a pretty-printed json-mode document.
const maxJSONDoc = 16 << 20

type geminiParser struct {
	opts ParserOptions
	red  redactor

	sessionID, model   string
	text               strings.Builder
	afterTool          bool
	lastError, warning string
	terminal, failed   bool
	errText            string
	code               result.ErrorCode
	usage              usageBuilder
	bestModel          string
	bestModelTotal     int64
	doc                []byte // a json-mode document being collected
	collecting         bool
	noise              noise
}

func (p *geminiParser) Feed(line []byte) {
	if p.collectDoc(line) {
		return
	}
	var ev geminiEvent
	if !parseJSON(line, &ev) {
		p.noise.add(line)
		return
	}
	switch ev.Type {
	case "init":
		if ev.SessionID != "" {
			p.sessionID = ev.SessionID
		}
		if ev.Model != "" {
			p.model = ev.Model
		}
	case "message":
		if ev.Role != "assistant" {
			return
		}
		if p.afterTool || !ev.Delta {
			// A new assistant turn (after tool calls) or a whole message.
			p.text.Reset()
			p.afterTool = false
		}
		p.text.WriteString(ev.Content)
	case "tool_use", "tool_result":
		p.afterTool = true
	case "error":
		if ev.Severity == "error" {
			p.lastError = ev.Message
		} else if ev.Message != "" {
			p.warning = ev.Message
		}
	case "result":
		p.terminal = true
		if ev.Status == "error" {
			p.fail(ev.Error)
		}
		if s := ev.Stats; s != nil {
			p.streamUsage(s)
		}
	case "":
		// A json-mode document printed on one line.
		var doc geminiJSONDoc
		if parseJSON(line, &doc) && (doc.Response != nil || doc.Stats != nil || len(doc.Error) > 0) {
			p.jsonDoc(doc)
		}
	}
}

// collectDoc gathers a pretty-printed json-mode document ("{" … "}" on
// lines of their own) and handles it when complete. It reports whether it
// consumed the line.
func (p *geminiParser) collectDoc(line []byte) bool {
	t := bytes.TrimSpace(line)
	if !p.collecting {
		if len(t) != 1 || t[0] != '{' {
			return false
		}
		p.collecting, p.doc = true, append(p.doc[:0], '{')
		return true
	}
	if len(line) > 0 && line[0] == '{' {
		// A stream event at column 0 (the document's own lines are
		// indented): the "{" was noise, not a document.
		var probe struct {
			Type string `json:"type"`
		}
		if parseJSON(line, &probe) && probe.Type != "" {
			p.collecting, p.doc = false, nil
			return false
		}
	}
	if len(p.doc)+len(line) > maxJSONDoc {
		p.collecting, p.doc = false, nil
		return true
	}
	p.doc = append(append(p.doc, '\n'), line...)
	if len(line) > 0 && line[0] == '}' {
		var doc geminiJSONDoc
		if json.Unmarshal(p.doc, &doc) == nil {
			p.jsonDoc(doc)
		}
		p.collecting, p.doc = false, nil
	}
	return true
}

func (p *geminiParser) jsonDoc(doc geminiJSONDoc) {
	p.terminal = true
	if doc.SessionID != "" {
		p.sessionID = doc.SessionID
	}
	if doc.Response != nil {
		p.text.Reset()
		p.text.WriteString(*doc.Response)
	}
	if len(doc.Error) > 0 && string(doc.Error) != "null" {
		p.fail(doc.Error)
	}
	if doc.Stats == nil {
		return
	}
	for _, name := range sortedKeys(doc.Stats.Models) {
		t := doc.Stats.Models[name].Tokens
		// prompt includes cached input; tool-use prompts are input too;
		// thoughts are output.
		p.usage.add(result.Usage{
			InputTokens:       max(t.Prompt-t.Cached, 0) + t.Tool,
			CachedInputTokens: t.Cached,
			OutputTokens:      t.Candidates + t.Thoughts,
		})
		p.noteModel(name, t.Total)
	}
}

func (p *geminiParser) fail(raw json.RawMessage) {
	p.failed = true
	var e geminiError
	if json.Unmarshal(raw, &e) != nil {
		_ = json.Unmarshal(raw, &e.Message)
	}
	p.errText = firstNonEmpty(e.Message, p.lastError, e.Type, "the result reports an error")
	if c, ok := classifyText(e.Type, e.Message); ok {
		p.code = c
	}
}

// streamUsage reads stream-json stats: input_tokens is the prompt including
// cached input; output_tokens excludes thinking, which total_tokens counts,
// so output is total minus prompt when the total is consistent.
func (p *geminiParser) streamUsage(s *geminiStats) {
	if s.InputTokens == nil && s.OutputTokens == nil && s.TotalTokens == nil {
		return
	}
	prompt, out, cached := deref(s.InputTokens), deref(s.OutputTokens), deref(s.Cached)
	uncached := prompt - cached
	if s.Input != nil {
		uncached = *s.Input
	}
	if s.TotalTokens != nil && *s.TotalTokens >= prompt+out {
		out = *s.TotalTokens - prompt
	}
	p.usage.set(result.Usage{InputTokens: uncached, CachedInputTokens: cached, OutputTokens: out})
	for _, name := range sortedKeys(s.Models) {
		p.noteModel(name, s.Models[name].TotalTokens)
	}
}

// noteModel remembers the model that used the most tokens: with model
// "auto" the CLI routes between models, and the busiest one did the work.
func (p *geminiParser) noteModel(name string, total int64) {
	if p.bestModel == "" || total > p.bestModelTotal {
		p.bestModel, p.bestModelTotal = name, total
	}
}

func (p *geminiParser) Finish(proc ProcessOutcome) Outcome {
	var o Outcome
	o.SessionID = strPtr(p.sessionID)
	model := p.model
	if (model == "" || strings.HasPrefix(model, "auto")) && p.bestModel != "" {
		model = p.bestModel
	}
	o.Model = strPtr(firstNonEmpty(model, p.opts.Model))
	o.Usage = p.usage.u
	if o.Usage != nil {
		o.UsageBasis = basisPtr(result.UsagePerRun)
	}
	if p.terminal && !p.failed {
		o.Summary = strPtr(p.text.String())
	}
	v := verdict{cli: "gemini", needTerminal: true, terminal: p.terminal, failed: p.failed,
		errText: p.errText, code: p.code, exitMeaning: geminiExits,
		notice: firstNonEmpty(p.lastError, p.warning, p.noise.last())}
	conclude(&o, v, proc, p.red)
	return o
}

func deref(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}
