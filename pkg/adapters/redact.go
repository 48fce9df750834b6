package adapters

import (
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/pcsync/pcsync/internal/lib/redact"
)

// Redacted replaces every secret in an error message: pcsync's one marker.
const Redacted = redact.Marker

// maxMessageLen bounds an error message, in bytes.
const maxMessageLen = 2000

// redactor removes secrets from text with pcsync's one redaction rule.
type redactor struct {
	r *redact.Redactor
}

func newRedactor(secrets []string) redactor { return redactor{r: redact.New(secrets...)} }

func (r redactor) redact(s string) string { return r.r.String(s) }

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
