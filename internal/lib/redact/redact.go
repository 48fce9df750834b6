// Package redact is pcsync's one redaction rule: everything a run writes
// (every string field of its result, every line of <name>.log, error
// messages built from the agent's output) and every message that could quote
// a secret passes through a Redactor. A Redactor replaces the values it is
// given (the agent's secrets: forwarded env keys, the agent's env, the
// run's Paperclip JWT; values shorter than MinLen are ignored) and then
// credentials recognised by their shape (bearer and basic tokens,
// Authorization headers, API keys of the known providers, JWTs), always with
// the one Marker.
package redact

import (
	"regexp"
	"slices"
	"strings"
)

// Marker replaces every secret pcsync redacts.
const Marker = "[redacted]"

// MinLen is the shortest given value that is redacted: shorter values ("1",
// "true") are settings, and replacing them would garble text.
const MinLen = 8

// patterns match credentials by shape; each is replaced by its template,
// which keeps what names the secret and drops the secret itself.
var patterns = []struct {
	re   *regexp.Regexp
	repl string
}{
	// An Authorization header or field: the whole credential after it.
	{regexp.MustCompile(`(?i)\b(authorization["']?\s*[:=]\s*["']?(?:bearer\s+|basic\s+|token\s+)?)[^\s"',;]+`), "${1}" + Marker},
	// A credential after "Bearer"/"Basic" has a digit; prose ("bearer or
	// basic authentication") has none.
	{regexp.MustCompile(`(?i)\b(bearer\s+)[A-Za-z._~+/=-]*[0-9][A-Za-z0-9._~+/=-]*`), "${1}" + Marker},
	{regexp.MustCompile(`(?i)\b(basic\s+)[A-Za-z+/=]*[0-9][A-Za-z0-9+/=]*`), "${1}" + Marker},
	{regexp.MustCompile(`\bsk-[A-Za-z0-9_*-]{8,}`), Marker},
	{regexp.MustCompile(`\bAIza[0-9A-Za-z_-]{20,}`), Marker},
	{regexp.MustCompile(`\b(?:AKIA|ASIA)[0-9A-Z]{16}\b`), Marker},
	{regexp.MustCompile(`\bgh[pousr]_[A-Za-z0-9]{20,}`), Marker},
	{regexp.MustCompile(`\bxox[abposr]-[A-Za-z0-9-]{10,}`), Marker},
	{regexp.MustCompile(`\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{4,}`), Marker},
	// OpenAI echoes the rejected key: "Incorrect API key provided: <key>."
	{regexp.MustCompile(`(?i)(api key provided:\s*)[^\s,;]+?(\.?(?:[\s,;]|$))`), "${1}" + Marker + "${2}"},
	{regexp.MustCompile(`(?i)((?:api[_-]?key|access[_-]?token|auth[_-]?token|secret|password)["']?\s*[:=]\s*["']?)[^\s"',;]{6,}`), "${1}" + Marker},
}

// Redactor removes secrets from text. The zero value and nil redact by shape
// only. It is safe for concurrent use.
type Redactor struct {
	// values are the given secrets, longest first, so that a value that
	// holds another is removed whole.
	values []string
}

// New returns a Redactor for the given secret values (empty and short ones
// are skipped; surrounding white space is ignored).
func New(values ...string) *Redactor {
	var vs []string
	for _, v := range values {
		v = strings.TrimSpace(v)
		if len(v) >= MinLen && !slices.Contains(vs, v) {
			vs = append(vs, v)
		}
	}
	slices.SortStableFunc(vs, func(a, b string) int { return len(b) - len(a) })
	return &Redactor{values: vs}
}

// String returns s with every secret replaced by Marker.
func (r *Redactor) String(s string) string {
	if r != nil {
		for _, v := range r.values {
			if strings.Contains(s, v) {
				s = strings.ReplaceAll(s, v, Marker)
			}
		}
	}
	for _, p := range patterns {
		s = p.re.ReplaceAllString(s, p.repl)
	}
	return s
}

// Ptr redacts *p in place when p is not nil.
func (r *Redactor) Ptr(p *string) {
	if p != nil {
		*p = r.String(*p)
	}
}

// longest is the length of the longest given value.
func (r *Redactor) longest() int {
	if r == nil || len(r.values) == 0 {
		return 0
	}
	return len(r.values[0])
}

// spans returns the byte ranges of b that String would change: given
// values and pattern matches.
func (r *Redactor) spans(b []byte) [][2]int {
	var out [][2]int
	if r != nil {
		for _, v := range r.values {
			for off := 0; ; {
				i := strings.Index(string(b[off:]), v)
				if i < 0 {
					break
				}
				out = append(out, [2]int{off + i, off + i + len(v)})
				off += i + len(v)
			}
		}
	}
	for _, p := range patterns {
		for _, m := range p.re.FindAllIndex(b, -1) {
			out = append(out, [2]int{m[0], m[1]})
		}
	}
	return out
}
