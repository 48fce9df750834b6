package allow

import (
	"fmt"
	"regexp"
	"strings"

	"golang.org/x/net/publicsuffix"
)

// labelChars is a DNS label's characters as Cilium's matchPattern has
// them (its allowedDNSCharsREGroup), in lower case: names are lowered
// before they are matched.
const labelChars = "[-a-z0-9_]"

// patternChars are the characters a pattern may hold.
var patternChars = regexp.MustCompile(`^[-a-z0-9_.*]+$`)

// Normalize is a host name or pattern as it is compared: lower case,
// without the trailing dot of a fully qualified name.
func Normalize(s string) string {
	return strings.TrimSuffix(strings.ToLower(strings.TrimSpace(s)), ".")
}

// IsPattern reports whether s holds a wildcard.
func IsPattern(s string) bool { return strings.Contains(s, "*") }

// CheckPattern says what is wrong with a pattern that holds a wildcard, or
// nil. A name without one is checked as a host name by the caller. A
// wildcard stands in the first label only, and what follows it is a
// registrable domain or a name under one: not a public suffix alone (ICANN's
// section of the Public Suffix List, or a single label), whose names belong
// to anyone.
func CheckPattern(p string) error {
	n := Normalize(p)
	_, rest, _ := strings.Cut(n, ".")
	switch {
	case n == "":
		return fmt.Errorf("pattern %q is empty", p)
	case !patternChars.MatchString(n):
		return fmt.Errorf("pattern %q: only letters, digits, '-', '_', '.' and '*' are allowed", p)
	case strings.Trim(n, "*.") == "":
		return fmt.Errorf("pattern %q matches every host; allow hosts by name (or set egress mode standard to allow every public host on TCP 443)", p)
	case strings.Contains(strings.TrimPrefix(n, "**."), "**"):
		return fmt.Errorf("pattern %q: \"**\" is allowed only as the first label (\"**.example.com\")", p)
	case strings.Contains(n, ".."), strings.HasPrefix(n, "."):
		return fmt.Errorf("pattern %q has an empty label", p)
	case strings.Contains(rest, "*"):
		return fmt.Errorf("pattern %q: a wildcard may stand only in the first label: write \"*.example.com\" or \"api-*.example.com\", or name the hosts", p)
	case publicSuffixAlone(rest):
		return fmt.Errorf("pattern %q: its wildcard is followed by the public suffix %q alone, so it matches anyone's domains: "+
			"put it before a registrable domain, as in \"*.example.com\"", p, rest)
	}
	return nil
}

// publicSuffixAlone reports whether name is a single label or a public
// suffix of ICANN's section of the Public Suffix List (com, co.uk), under
// which anyone may register a domain. A suffix of the list's private
// section (s3.amazonaws.com, github.io) is one company's, and allowed.
func publicSuffixAlone(name string) bool {
	if !strings.Contains(name, ".") {
		return true
	}
	suffix, icann := publicsuffix.PublicSuffix(name)
	return icann && suffix == name
}

// compile returns the anchored regular expression of a pattern (checked
// or a plain name).
func compile(p string) (*regexp.Regexp, error) {
	n := Normalize(p)
	if IsPattern(n) {
		if err := CheckPattern(n); err != nil {
			return nil, err
		}
	}
	var b strings.Builder
	b.WriteString("^")
	if rest, ok := strings.CutPrefix(n, "**."); ok {
		// One or more whole labels.
		b.WriteString(labelChars + "+(?:[.]" + labelChars + "+)*[.]")
		n = rest
	}
	for i, part := range strings.Split(n, "*") {
		if i > 0 {
			b.WriteString(labelChars + "*")
		}
		b.WriteString(regexp.QuoteMeta(part))
	}
	b.WriteString("$")
	return regexp.Compile(b.String())
}

// Matcher matches host names against a list of names and patterns.
type Matcher struct {
	exact    map[string]bool
	patterns []*regexp.Regexp
}

// Compile builds the Matcher of hosts (names and patterns). It fails on a
// pattern that CheckPattern refuses.
func Compile(hosts []string) (*Matcher, error) {
	m := &Matcher{exact: map[string]bool{}}
	for _, h := range hosts {
		if !IsPattern(h) {
			m.exact[Normalize(h)] = true
			continue
		}
		re, err := compile(h)
		if err != nil {
			return nil, err
		}
		m.patterns = append(m.patterns, re)
	}
	return m, nil
}

// Match reports whether host (a name, without port) is allowed.
func (m *Matcher) Match(host string) bool {
	h := Normalize(host)
	if h == "" {
		return false
	}
	if m.exact[h] {
		return true
	}
	for _, re := range m.patterns {
		if re.MatchString(h) {
			return true
		}
	}
	return false
}
