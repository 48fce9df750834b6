package config

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"cuelang.org/go/cue/ast"
	cueerrors "cuelang.org/go/cue/errors"
	"cuelang.org/go/cue/literal"
	"cuelang.org/go/cue/token"
)

// issue is one schema problem at a user field path.
type issue struct {
	path fieldPath
	msg  string
	// atKey asks for the key's position rather than the value's.
	atKey bool
}

// rank orders the messages CUE gives for one path, most specific first.
type rank int

const (
	rankNotAllowed rank = iota
	rankSpecific        // bounds, patterns, custom errors
	rankType            // mismatched types
	rankEnum            // conflicting with one of several allowed values
	rankIncomplete      // no value where one is required
)

type rawMsg struct {
	rank   rank
	format string
	args   []any
	text   string
}

// issuesOf turns a CUE validation error into user issues: one per field
// path, with the most specific message, paths in the user's terms.
func issuesOf(err error, doc ast.Expr) []issue {
	var order []string
	groups := map[string]*msgGroup{}
	for _, e := range cueerrors.Errors(err) {
		format, args := e.Msg()
		if strings.Contains(format, "errors in empty disjunction") || strings.HasPrefix(format, "incomplete argument") {
			// Headers of sub-errors, and a builtin called on a missing
			// value (reported as that value's own error).
			continue
		}
		p := userPath(doc, e.Path())
		k := p.String()
		g, ok := groups[k]
		if !ok {
			g = &msgGroup{path: p}
			groups[k] = g
			order = append(order, k)
		}
		g.msgs = append(g.msgs, classify(format, args))
	}
	var out []issue
	for _, k := range order {
		g := groups[k]
		best := slices.MinFunc(g.msgs, func(a, b rawMsg) int { return int(a.rank) - int(b.rank) })
		if best.rank >= rankType && hasDeeper(groups, g.path) {
			// A disjunction (string | {cidr, ...}) failed at this level
			// because a field below failed: the field below says why.
			continue
		}
		out = append(out, describe(g.path, g.msgs, best, doc))
	}
	return out
}

// msgGroup is CUE's messages for one field path.
type msgGroup struct {
	path fieldPath
	msgs []rawMsg
}

// hasDeeper reports whether some group lies strictly below p.
func hasDeeper(groups map[string]*msgGroup, p fieldPath) bool {
	for _, g := range groups {
		if len(g.path) > len(p) && g.path.under(p) {
			return true
		}
	}
	return false
}

// userPath converts a CUE error path (#Company, spec, agents, 0, "1X") to a
// user field path, using the document to tell list indexes from keys.
func userPath(doc ast.Expr, sels []string) fieldPath {
	var p fieldPath
	cur := doc
	for i, s := range sels {
		if i == 0 && strings.HasPrefix(s, "#") {
			continue
		}
		if strings.HasPrefix(s, `"`) {
			if u, err := literal.Unquote(s); err == nil {
				s = u
			}
			p = append(p, key(s))
			cur = child(cur, key(s))
			continue
		}
		if n, err := strconv.Atoi(s); err == nil && n >= 0 {
			if _, isStruct := cur.(*ast.StructLit); !isStruct {
				p = append(p, index(n))
				cur = child(cur, index(n))
				continue
			}
		}
		p = append(p, key(s))
		cur = child(cur, key(s))
	}
	return p
}

func child(e ast.Expr, el pathElem) ast.Expr {
	if e == nil {
		return nil
	}
	l := locate(e, fieldPath{el})
	if !l.found {
		return nil
	}
	return l.value
}

func classify(format string, args []any) rawMsg {
	m := rawMsg{format: format, args: args, text: oneLine(fmt.Sprintf(format, args...))}
	switch {
	case strings.HasPrefix(format, "field not allowed"):
		m.rank = rankNotAllowed
	case strings.Contains(format, "mismatched types"):
		m.rank = rankType
	case format == "conflicting values %s and %s":
		m.rank = rankEnum
	case strings.HasPrefix(format, "incomplete value"):
		m.rank = rankIncomplete
	default:
		m.rank = rankSpecific
	}
	return m
}

// describe writes the message of one path's issue.
func describe(p fieldPath, msgs []rawMsg, best rawMsg, doc ast.Expr) issue {
	l := locate(doc, p)
	is := issue{path: p, msg: best.text}
	switch best.rank {
	case rankNotAllowed:
		is.msg, is.atKey = "field not allowed", true
	case rankIncomplete:
		if !l.found {
			is.msg, is.atKey = "field is required", true
		}
	case rankType:
		got := kindOf(l.value)
		var want []string
		for _, m := range msgs {
			if m.rank != rankType || len(m.args) < 2 {
				continue
			}
			a, b := fmt.Sprint(m.args[len(m.args)-2]), fmt.Sprint(m.args[len(m.args)-1])
			switch {
			case a == got && b != got:
				want = append(want, b)
			case b == got && a != got:
				want = append(want, a)
			}
		}
		if got != "" && len(want) > 0 {
			slices.Sort(want)
			is.msg = "expected " + strings.Join(slices.Compact(want), " or ") + ", got " + got
		}
	case rankEnum:
		lit := literalOf(l.value)
		var allowed []string
		for _, m := range msgs {
			if m.rank != rankEnum || len(m.args) != 2 {
				continue
			}
			a, b := fmt.Sprint(m.args[0]), fmt.Sprint(m.args[1])
			switch {
			case a == lit:
				allowed = append(allowed, b)
			case b == lit:
				allowed = append(allowed, a)
			}
		}
		if lit != "" && len(allowed) > 0 {
			slices.Sort(allowed)
			allowed = slices.Compact(allowed)
			if len(allowed) == 1 {
				is.msg = "invalid value " + lit + ": must be " + allowed[0]
			} else {
				is.msg = "invalid value " + lit + ": must be one of " + strings.Join(allowed, ", ")
			}
		}
	case rankSpecific:
		is.msg = specific(best)
	}
	return is
}

// specific rewords bound and pattern errors in the user's terms.
func specific(m rawMsg) string {
	if len(m.args) != 2 {
		return m.text
	}
	val, bound := fmt.Sprint(m.args[0]), fmt.Sprint(m.args[1])
	switch m.format {
	case "invalid value %v (out of bound %s)":
		if d := describeBound(bound); d != "" {
			return "invalid value " + val + ": " + d
		}
	case "invalid value %s (does not satisfy %s)":
		if d := describeBound(bound); d != "" {
			return "invalid value " + val + ": " + d
		}
	}
	return m.text
}

var (
	boundNum = regexp.MustCompile(`^(>=|<=|>|<)\s*(-?[0-9.]+)$`)
	runes    = regexp.MustCompile(`^strings\.(Max|Min)Runes\((\d+)\)$`)
)

// patterns describes the regular expressions of the schema.
var patterns = []struct{ fragment, text string }{
	{`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]`, "must be a DNS subdomain: lower-case letters, digits, '-' and '.', starting and ending with a letter or digit"},
	{`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`, "must be a DNS label: lower-case letters, digits and '-', starting and ending with a letter or digit"},
	{`^[a-z0-9-]{1,20}$`, "must be 1 to 20 lower-case letters, digits or '-'"},
	{`(m|k|Ki|M|Mi|G|Gi|T|Ti|P|Pi|E|Ei)?$`, "must be a Kubernetes quantity such as 250m, 2Gi or 4"},
	{`^[A-Za-z_][A-Za-z0-9_]*$`, "must be an environment variable name: letters, digits and '_', not starting with a digit"},
	{`^[A-Za-z][A-Za-z0-9_]*$`, "must start with a letter and hold only letters, digits and '_'"},
	{`(:[0-9]+)?(/[a-z0-9]`, "must be a registry host[:port] with an optional /org path, in lower case"},
	{`^https?://[^/?#@`, "must be an http:// or https:// URL with a host and an optional path, without user, password, query or fragment"},
	{`"^/"`, "must be an absolute path"},
	{`^https://[^/?#@`, "must be an https:// URL with a host and an optional path, without user, password, query or fragment"},
	{`^[-._a-zA-Z0-9]{1,253}$`, "must be a Secret data key: 1 to 253 letters, digits, '-', '_' or '.'"},
	{`^[A-Za-z0-9-]{1,64}$`, "must be an HTTP header name: 1 to 64 letters, digits or '-'"},
	{`^[A-Za-z0-9-]{1,32}$`, "must be an authorization scheme such as Bearer: 1 to 32 letters, digits or '-'"},
}

func describeBound(b string) string {
	if m := boundNum.FindStringSubmatch(b); m != nil {
		words := map[string]string{">=": "at least", "<=": "at most", ">": "greater than", "<": "less than"}
		return "must be " + words[m[1]] + " " + m[2]
	}
	if m := runes.FindStringSubmatch(b); m != nil {
		if m[1] == "Min" {
			if m[2] == "1" {
				return "must not be empty"
			}
			return "must be at least " + m[2] + " characters long"
		}
		return "must be at most " + m[2] + " characters long"
	}
	if strings.HasPrefix(b, "=~") {
		for _, p := range patterns {
			if strings.Contains(b, p.fragment) {
				return p.text
			}
		}
		return "must match " + b[2:]
	}
	return ""
}

// kindOf names the CUE kind of a data value as CUE's errors do.
func kindOf(e ast.Expr) string {
	switch x := e.(type) {
	case *ast.StructLit:
		return "struct"
	case *ast.ListLit:
		return "list"
	case *ast.BasicLit:
		switch x.Kind {
		case token.STRING:
			return "string"
		case token.INT:
			return "int"
		case token.FLOAT:
			return "float"
		case token.TRUE, token.FALSE:
			return "bool"
		case token.NULL:
			return "null"
		}
	case *ast.Ident:
		switch x.Name {
		case "true", "false":
			return "bool"
		case "null":
			return "null"
		}
	}
	return ""
}

// literalOf is a scalar data value as CUE prints it.
func literalOf(e ast.Expr) string {
	switch x := e.(type) {
	case *ast.BasicLit:
		if x.Kind == token.STRING {
			if s, err := literal.Unquote(x.Value); err == nil {
				return literal.String.Quote(s)
			}
		}
		return x.Value
	case *ast.Ident:
		return x.Name
	}
	return ""
}

// oneLine keeps a message on one line.
func oneLine(s string) string {
	if !strings.ContainsAny(s, "\r\n\t") {
		return s
	}
	return strings.Join(strings.Fields(s), " ")
}

// sprintf formats a message on one line.
func sprintf(format string, args ...any) string {
	return oneLine(fmt.Sprintf(format, args...))
}
