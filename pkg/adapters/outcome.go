package adapters

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/pcsync/pcsync/pkg/result"
)

// verdict is what a parser learned from the stream about how the run went;
// conclude combines it with the process outcome.
type verdict struct {
	cli string // the CLI's name, used in messages ("claude")
	// terminal is set when the stream's final event (claude result, codex
	// turn.completed/failed, …) was seen; needTerminal says the CLI always
	// prints one when it ends normally.
	terminal, needTerminal bool
	// errText is the error the stream reported, "" when none.
	errText string
	// code is a code the stream determined structurally ("" to classify
	// errText and stderr instead).
	code result.ErrorCode
	// failed is set when the stream says the run failed even without text.
	failed bool
	// notice is the last non-fatal message (a retry notice, a warning), kept
	// to explain timeouts and silent exits.
	notice string
	// exitMeaning explains the CLI's documented exit codes.
	exitMeaning map[int]exitClass
}

// exitClass is what a documented exit code means.
type exitClass struct {
	code result.ErrorCode // "" when it says nothing about the cause
	text string
}

// conclude sets Failed, ErrorCode and ErrorMessage on o. A failed run has
// no summary: its text is in the error message.
func conclude(o *Outcome, v verdict, p ProcessOutcome, red redactor) {
	defer func() {
		if o.Failed {
			o.Summary = nil
		}
	}()
	stderr := stderrDigest(p.Stderr)
	fail := func(code result.ErrorCode, msg string) {
		o.Failed = true
		o.ErrorCode = &code
		m := red.clean(msg)
		o.ErrorMessage = &m
	}
	detail := firstNonEmpty(v.errText, v.notice, stderr)
	withDetail := func(s string) string {
		if detail == "" {
			return s
		}
		return s + "; last message: " + detail
	}
	switch {
	case p.Cancelled:
		fail(result.ErrCancelled, withDetail(v.cli+" was cancelled"))
		return
	case p.TimedOut:
		fail(result.ErrTimeout, withDetail(v.cli+" did not finish before its deadline and was stopped"))
		return
	}
	exitInfo, abnormal := describeExit(p, v.exitMeaning)
	if v.errText != "" || v.code != "" || v.failed {
		code := v.code
		if code == "" {
			code = classifyAll(v, p, stderr)
		}
		msg := v.cli + " failed"
		if v.errText != "" {
			msg += ": " + v.errText
			if _, ok := classifyText(v.errText); !ok && stderr != "" {
				// The stream's text does not say what went wrong
				// (e.g. opencode's "Unexpected server error"); stderr may.
				msg += "; stderr: " + stderr
			}
		} else if stderr != "" {
			msg += ": " + stderr
		}
		if abnormal {
			msg += "; " + exitInfo
		}
		fail(code, msg)
		return
	}
	if abnormal {
		code := classifyAll(v, p, stderr)
		msg := v.cli + " " + exitInfo
		if d := firstNonEmpty(stderr, v.notice); d != "" {
			msg += ": " + d
		}
		fail(code, msg)
		return
	}
	if v.needTerminal && !v.terminal && p.ExitCode != nil {
		fail(result.ErrAgentFailed, withDetail(v.cli+" exited with code 0 but its output ended before the final result event (truncated output?)"))
	}
}

// classifyAll classifies a failure from the stream's error text, then
// stderr, then the last notice, then the exit code's documented meaning.
func classifyAll(v verdict, p ProcessOutcome, stderr string) result.ErrorCode {
	if c, ok := classifyText(v.errText); ok {
		return c
	}
	if c, ok := classifyText(stderr); ok {
		return c
	}
	if c, ok := classifyText(v.notice); ok {
		return c
	}
	if p.ExitCode != nil {
		if m, ok := v.exitMeaning[*p.ExitCode]; ok && m.code != "" {
			return m.code
		}
	}
	return result.ErrAgentFailed
}

// describeExit says how the process ended, and whether that is a failure.
func describeExit(p ProcessOutcome, meanings map[int]exitClass) (string, bool) {
	if p.ExitCode == nil {
		if p.Signal != "" {
			return "was killed by " + p.Signal, true
		}
		return "", false
	}
	c := *p.ExitCode
	s := fmt.Sprintf("exited with code %d", c)
	if m, ok := meanings[c]; ok && m.text != "" {
		s += " (" + m.text + ")"
	} else if c == 137 {
		s += " (killed by SIGKILL; out of memory?)"
	}
	return s, c != 0
}

// parseJSON decodes a stream line into v. It reports false for lines that
// are not a JSON object (noise such as warnings printed to stdout). A field
// of an unexpected type is left empty rather than losing the whole event.
func parseJSON(line []byte, v any) bool {
	line = bytes.TrimSpace(line)
	if len(line) < 2 || line[0] != '{' {
		return false
	}
	err := json.Unmarshal(line, v)
	var typeErr *json.UnmarshalTypeError
	return err == nil || errors.As(err, &typeErr)
}

// noise keeps the last few non-JSON stdout lines, to explain failures.
type noise struct {
	lines []string
}

func (n *noise) add(line []byte) {
	s := strings.TrimSpace(stripANSI(string(line)))
	if s == "" || s[0] == '{' || s[0] == '[' {
		// Empty, or a cut or malformed JSON event: nothing to tell a user.
		return
	}
	n.lines = append(n.lines, truncate(s, 500))
	if len(n.lines) > 5 {
		n.lines = n.lines[1:]
	}
}

func (n *noise) last() string {
	if len(n.lines) == 0 {
		return ""
	}
	return n.lines[len(n.lines)-1]
}

// usageBuilder accumulates token counts; it stays nil until some count is
// reported, so a stream without usage gives nil, never zeros.
type usageBuilder struct {
	u *result.Usage
}

func (b *usageBuilder) add(v result.Usage) {
	v = nonNegative(v)
	if b.u == nil {
		b.u = &result.Usage{}
	}
	*b.u = b.u.Add(v)
}

func (b *usageBuilder) set(v result.Usage) {
	v = nonNegative(v)
	b.u = &v
}

func nonNegative(v result.Usage) result.Usage {
	clamp := func(x int64) int64 { return max(x, 0) }
	return result.Usage{
		InputTokens:              clamp(v.InputTokens),
		CachedInputTokens:        clamp(v.CachedInputTokens),
		CacheCreationInputTokens: clamp(v.CacheCreationInputTokens),
		OutputTokens:             clamp(v.OutputTokens),
	}
}

// costBuilder sums costs; nil until one is reported.
type costBuilder struct {
	c *float64
}

func (b *costBuilder) add(v float64) {
	if v < 0 || v != v { // negative or NaN: not a cost
		return
	}
	if b.c == nil {
		b.c = new(float64)
	}
	*b.c += v
}

func strPtr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func basisPtr(b result.UsageBasis) *result.UsageBasis { return &b }
