package adapters

import (
	"regexp"
	"sort"
	"strings"
	"unicode/utf8"
)

// Redacted replaces every secret in an error message.
const Redacted = "[REDACTED]"

// minSecretLen is the shortest caller-given value that is redacted: shorter
// values ("1", "true") are settings, and replacing them would garble text.
const minSecretLen = 8

// maxMessageLen bounds an error message, in bytes.
const maxMessageLen = 2000

// secretPatterns match credentials by shape; each is replaced by its
// template, which keeps what names the secret and drops the secret itself.
var secretPatterns = []struct {
	re   *regexp.Regexp
	repl string
}{
	// A credential after "Bearer"/"Basic" has a digit; prose ("bearer or
	// basic authentication") has none.
	{regexp.MustCompile(`(?i)\b(bearer\s+)[A-Za-z._~+/=-]*[0-9][A-Za-z0-9._~+/=-]*`), "${1}" + Redacted},
	{regexp.MustCompile(`(?i)\b(basic\s+)[A-Za-z+/=]*[0-9][A-Za-z0-9+/=]*`), "${1}" + Redacted},
	{regexp.MustCompile(`\bsk-[A-Za-z0-9_*-]{8,}`), Redacted},
	{regexp.MustCompile(`\bAIza[0-9A-Za-z_-]{20,}`), Redacted},
	{regexp.MustCompile(`\b(?:AKIA|ASIA)[0-9A-Z]{16}\b`), Redacted},
	{regexp.MustCompile(`\bgh[pousr]_[A-Za-z0-9]{20,}`), Redacted},
	{regexp.MustCompile(`\bxox[abposr]-[A-Za-z0-9-]{10,}`), Redacted},
	{regexp.MustCompile(`\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{4,}`), Redacted},
	// OpenAI echoes the rejected key: "Incorrect API key provided: <key>."
	{regexp.MustCompile(`(?i)(api key provided:\s*)[^\s,;]+?(\.?(?:[\s,;]|$))`), "${1}" + Redacted + "${2}"},
	{regexp.MustCompile(`(?i)((?:api[_-]?key|access[_-]?token|auth[_-]?token|secret|password)["']?\s*[:=]\s*["']?)[^\s"',;]{6,}`), "${1}" + Redacted},
}

// redactor removes secrets from text: caller-given values first (longest
// first, so a value containing another is removed whole), then shapes.
type redactor struct {
	values []string
}

func newRedactor(secrets []string) redactor {
	var vs []string
	for _, s := range secrets {
		s = strings.TrimSpace(s)
		if len(s) >= minSecretLen {
			vs = append(vs, s)
		}
	}
	sort.Slice(vs, func(i, j int) bool { return len(vs[i]) > len(vs[j]) })
	return redactor{values: vs}
}

func (r redactor) redact(s string) string {
	for _, v := range r.values {
		s = strings.ReplaceAll(s, v, Redacted)
	}
	for _, p := range secretPatterns {
		s = p.re.ReplaceAllString(s, p.repl)
	}
	return s
}

// clean strips colour codes from s, redacts it, trims it and bounds its
// length to maxMessageLen bytes.
func (r redactor) clean(s string) string {
	s = stripANSI(s)
	s = strings.TrimSpace(r.redact(s))
	return truncate(s, maxMessageLen)
}

var ansiPattern = regexp.MustCompile(`\x1b\[[0-9;?]*[ -/]*[@-~]`)

func stripANSI(s string) string { return ansiPattern.ReplaceAllString(s, "") }

// truncate cuts s to at most n bytes on a rune boundary, marking the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - len("…")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
