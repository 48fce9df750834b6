package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"cuelang.org/go/cue/ast"
	"cuelang.org/go/cue/token"
	cuejson "cuelang.org/go/encoding/json"
	yaml "go.yaml.in/yaml/v3"
)

// document is one YAML (or JSON) document of a file, converted to CUE
// syntax whose nodes carry positions in the user's file.
type document struct {
	// file is the path shown to the user.
	file string
	// index is the document's place in its file, from 0.
	index int
	// expr is the document's value; a *ast.StructLit for a mapping.
	expr ast.Expr
	// start is the position of the document's first node.
	start Position
}

// parseLimits bound the work that a hostile document can cause.
type parseLimits struct {
	// maxNodes is the most values a file may hold once YAML aliases are
	// expanded (an alias bomb expands exponentially).
	maxNodes int
}

// parseYAML splits a file into documents and converts each to CUE syntax.
// Documents before a syntax error are returned along with the error, so
// that they can be validated too. Empty documents are left out.
func parseYAML(name string, data []byte, lim parseLimits) (docs []*document, perr *Error) {
	defer func() {
		// The YAML parser is old C code translated to Go; never let a
		// surprise in it take the process down.
		if r := recover(); r != nil {
			perr = &Error{Pos: Position{File: name, Line: 1, Column: 1}, Message: fmt.Sprintf("YAML parser failed: %v", r)}
		}
	}()
	c := newConverter(name, data, lim)
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for i := 0; ; i++ {
		var n yaml.Node
		err := dec.Decode(&n)
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return docs, c.syntaxError(err)
		}
		if len(n.Content) == 0 {
			continue
		}
		root := n.Content[0]
		if root.Kind == yaml.ScalarNode && root.ShortTag() == "!!null" {
			continue // "---" with nothing after it
		}
		expr, cerr := c.convert(root)
		if cerr != nil {
			return docs, cerr
		}
		docs = append(docs, &document{file: name, index: i, expr: expr, start: c.position(root.Line, root.Column)})
	}
}

// yamlLine finds the line number in yaml.v3's error messages.
var yamlLine = regexp.MustCompile(`^yaml: line (\d+): `)

// syntaxError positions a YAML syntax error at the token the parser stopped
// on, keeping the parser's explanation. yaml.v3's message names the line
// where the enclosing construct began (a list that starts at line 8 when
// line 10 is mis-indented), not the line to fix, so the token is found by
// parsing prefixes of the file: the shortest prefix that fails with the same
// explanation ends in the offending token. When no prefix does (a message
// that depends on what follows), the line of the message is used.
func (c *converter) syntaxError(err error) *Error {
	msg, line := splitYAMLError(err)
	col := 1
	if !hostileInput(msg) {
		if l, cl, ok := locateSyntaxError(c.data, msg, line); ok {
			line, col = l, cl
		}
	}
	if line > len(c.lines) {
		line = len(c.lines)
	}
	return &Error{Pos: Position{File: c.name, Line: max(line, 1), Column: col}, Message: "YAML syntax error: " + oneLine(msg)}
}

// hostileInput reports whether msg is one of yaml.v3's limits against hostile
// input (nesting, aliases): no token to point at, and parsing prefixes of
// such input again and again would cost more than the answer is worth.
func hostileInput(msg string) bool {
	return strings.HasPrefix(msg, "exceeded max depth") || strings.Contains(msg, "excessive aliasing")
}

// splitYAMLError separates yaml.v3's explanation from the line it names
// (1 when it names none).
func splitYAMLError(err error) (msg string, line int) {
	msg, line = err.Error(), 1
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		if n, err := strconv.Atoi(m[1]); err == nil && n >= 1 {
			line = n
		}
		msg = msg[len(m[0]):]
		if isParserError(msg) {
			// yaml.v3 reports the parser's (not the scanner's) lines
			// counting from 0.
			line++
		}
		return msg, line
	}
	return strings.TrimPrefix(strings.TrimPrefix(msg, "yaml:"), " "), line
}

// locateSyntaxError finds the line and column (from 1) of the token on which
// parsing data fails with the explanation msg: the line is the first one,
// from line from (where yaml.v3 says the failing construct began) on, whose
// end makes a prefix fail with msg (binary search: a longer prefix holds the
// same token); the column is that of the token in which a prefix ending
// inside that line first fails. ok is false when the whole of data does not
// fail with msg.
func locateSyntaxError(data []byte, msg string, from int) (line, col int, ok bool) {
	fails := func(n int) bool {
		err := yamlSyntax(data[:n])
		if err == nil {
			return false
		}
		m, _ := splitYAMLError(err)
		return m == msg
	}
	starts := []int{0}
	for i, b := range data {
		if b == '\n' && i+1 < len(data) {
			starts = append(starts, i+1)
		}
	}
	end := func(l int) int {
		if l+1 < len(starts) {
			return starts[l+1]
		}
		return len(data)
	}
	if !fails(len(data)) {
		return 0, 0, false
	}
	lo, hi := min(max(from-1, 0), len(starts)-1), len(starts)-1
	for lo < hi {
		mid := (lo + hi) / 2
		if fails(end(mid)) {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	first, last := starts[lo]+1, end(lo)
	n := first + sort.Search(last-first+1, func(i int) bool { return fails(first + i) })
	if n > last {
		return lo + 1, 1, true
	}
	// The prefix ends in the token's first character, or in a later one
	// (a "-" or ":" needs what follows): go back to the token's start.
	i := n - 1
	for i > starts[lo] && data[i-1] != ' ' && data[i-1] != '\t' {
		i--
	}
	return lo + 1, utf8.RuneCount(data[starts[lo]:i]) + 1, true
}

// yamlSyntax parses every document of data and returns the first syntax
// error, nil if there is none.
func yamlSyntax(data []byte) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("YAML parser failed: %v", r)
		}
	}()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var n yaml.Node
		if err := dec.Decode(&n); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}

// isParserError reports whether a yaml.v3 message comes from its parser
// (rather than its scanner), whose line numbers count from 0.
func isParserError(msg string) bool {
	for _, p := range []string{"did not find expected", "found duplicate %", "found incompatible YAML document", "found undefined tag handle"} {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}

// converter turns yaml.v3 nodes into CUE syntax with positions.
type converter struct {
	name     string
	data     []byte
	tf       *token.File
	lines    []int // byte offset of each line start
	budget   int
	aliasing map[*yaml.Node]bool
}

func newConverter(name string, data []byte, lim parseLimits) *converter {
	tf := token.NewFile(name, -1, len(data)+1)
	tf.SetLinesForContent(data)
	return &converter{name: name, data: data, tf: tf, lines: tf.Lines(), budget: lim.maxNodes}
}

// position is a user-facing position from a YAML line and column.
func (c *converter) position(line, col int) Position {
	return Position{File: c.name, Line: max(line, 1), Column: max(col, 1)}
}

// pos converts a YAML line and column to a CUE position in the file, so
// that the position comes back from the syntax tree as the same line and
// column.
func (c *converter) pos(line, col int) token.Pos {
	if line < 1 || line > len(c.lines) || col < 1 {
		return token.NoPos
	}
	off := c.lines[line-1] + col - 1
	end := len(c.data)
	if line < len(c.lines) {
		end = c.lines[line] - 1
	}
	off = min(off, max(end, c.lines[line-1]))
	return c.tf.Pos(off, token.NoRelPos)
}

func (c *converter) errorf(n *yaml.Node, format string, args ...any) *Error {
	return &Error{Pos: c.position(n.Line, n.Column), Message: sprintf(format, args...)}
}

func (c *converter) convert(n *yaml.Node) (ast.Expr, *Error) {
	c.budget--
	if c.budget < 0 {
		return nil, c.errorf(n, "document too large: more than the limit of values once YAML aliases are expanded")
	}
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) != 1 {
			return nil, c.errorf(n, "YAML document must hold one value")
		}
		return c.convert(n.Content[0])
	case yaml.AliasNode:
		if n.Alias == nil {
			return nil, c.errorf(n, "YAML alias *%s refers to no anchor", n.Value)
		}
		if c.aliasing[n] {
			return nil, c.errorf(n, "YAML alias *%s refers to a value that contains it", n.Value)
		}
		if c.aliasing == nil {
			c.aliasing = map[*yaml.Node]bool{}
		}
		c.aliasing[n] = true
		defer delete(c.aliasing, n)
		return c.convert(n.Alias)
	case yaml.SequenceNode:
		l := &ast.ListLit{Lbrack: c.pos(n.Line, n.Column)}
		for _, e := range n.Content {
			x, err := c.convert(e)
			if err != nil {
				return nil, err
			}
			l.Elts = append(l.Elts, x)
		}
		return l, nil
	case yaml.MappingNode:
		return c.mapping(n)
	case yaml.ScalarNode:
		return c.scalar(n)
	}
	return nil, c.errorf(n, "unsupported YAML node")
}

func (c *converter) mapping(n *yaml.Node) (ast.Expr, *Error) {
	s := &ast.StructLit{Lbrace: c.pos(n.Line, n.Column), Elts: make([]ast.Decl, 0, len(n.Content)/2)}
	var seen keySet
	var merged []*ast.Field
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		for k.Kind == yaml.AliasNode && k.Alias != nil {
			k = k.Alias
		}
		if k.Kind != yaml.ScalarNode {
			return nil, c.errorf(n.Content[i], "a mapping key must be a plain value, not a mapping or list")
		}
		if k.ShortTag() == "!!merge" {
			fs, err := c.merge(v)
			if err != nil {
				return nil, err
			}
			merged = append(merged, fs...)
			continue
		}
		if first, dup := seen.get(k.Value); dup {
			return nil, c.errorf(n.Content[i], "key %q repeated (first at line %d)", k.Value, first.Line)
		}
		seen.add(k.Value, n.Content[i])
		val, err := c.convert(v)
		if err != nil {
			return nil, err
		}
		label := ast.NewString(k.Value)
		label.ValuePos = c.pos(n.Content[i].Line, n.Content[i].Column)
		s.Elts = append(s.Elts, &ast.Field{Label: label, Value: val})
	}
	// Merged keys (<<: *base) give way to keys written in the mapping.
	for _, f := range merged {
		name, _, _ := ast.LabelName(f.Label)
		if _, ok := seen.get(name); ok {
			continue
		}
		seen.add(name, n)
		s.Elts = append(s.Elts, f)
	}
	return s, nil
}

// keySet is the keys of a mapping seen so far, with their nodes: a list
// while short (most mappings are), a map beyond.
type keySet struct {
	names []string
	nodes []*yaml.Node
	m     map[string]*yaml.Node
}

// keySetListMax is the most keys a keySet keeps in its list.
const keySetListMax = 16

func (s *keySet) get(k string) (*yaml.Node, bool) {
	if s.m != nil {
		n, ok := s.m[k]
		return n, ok
	}
	for i, name := range s.names {
		if name == k {
			return s.nodes[i], true
		}
	}
	return nil, false
}

func (s *keySet) add(k string, n *yaml.Node) {
	if s.m == nil && len(s.names) < keySetListMax {
		s.names = append(s.names, k)
		s.nodes = append(s.nodes, n)
		return
	}
	if s.m == nil {
		s.m = make(map[string]*yaml.Node, 2*keySetListMax)
		for i, name := range s.names {
			s.m[name] = s.nodes[i]
		}
	}
	s.m[k] = n
}

// merge resolves the value of a YAML merge key: a mapping or a list of them.
func (c *converter) merge(v *yaml.Node) ([]*ast.Field, *Error) {
	x, err := c.convert(v)
	if err != nil {
		return nil, err
	}
	var structs []*ast.StructLit
	switch x := x.(type) {
	case *ast.StructLit:
		structs = append(structs, x)
	case *ast.ListLit:
		for _, e := range x.Elts {
			s, ok := e.(*ast.StructLit)
			if !ok {
				return nil, c.errorf(v, "the value of a YAML merge key (<<) must be a mapping or a list of mappings")
			}
			structs = append(structs, s)
		}
	default:
		return nil, c.errorf(v, "the value of a YAML merge key (<<) must be a mapping or a list of mappings")
	}
	var out []*ast.Field
	seen := map[string]bool{}
	for _, s := range structs {
		for _, d := range s.Elts {
			f := d.(*ast.Field)
			name, _, _ := ast.LabelName(f.Label)
			if !seen[name] {
				seen[name] = true
				out = append(out, f)
			}
		}
	}
	return out, nil
}

func (c *converter) scalar(n *yaml.Node) (ast.Expr, *Error) {
	p := c.pos(n.Line, n.Column)
	switch tag := n.ShortTag(); tag {
	case "!!str", "!!timestamp", "!!binary":
		s := ast.NewString(n.Value)
		s.ValuePos = p
		return s, nil
	case "!!null":
		return &ast.BasicLit{Kind: token.NULL, Value: "null", ValuePos: p}, nil
	case "!!bool":
		var b bool
		if err := n.Decode(&b); err != nil {
			return nil, c.errorf(n, "invalid boolean %q", n.Value)
		}
		return &ast.BasicLit{Kind: boolToken(b), Value: strconv.FormatBool(b), ValuePos: p}, nil
	case "!!int", "!!float":
		var x any
		if err := n.Decode(&x); err != nil {
			return nil, c.errorf(n, "invalid number %q", n.Value)
		}
		switch x := x.(type) {
		case int:
			return &ast.BasicLit{Kind: token.INT, Value: strconv.Itoa(x), ValuePos: p}, nil
		case int64:
			return &ast.BasicLit{Kind: token.INT, Value: strconv.FormatInt(x, 10), ValuePos: p}, nil
		case uint64:
			return &ast.BasicLit{Kind: token.INT, Value: strconv.FormatUint(x, 10), ValuePos: p}, nil
		case float64:
			if math.IsInf(x, 0) || math.IsNaN(x) {
				return nil, c.errorf(n, "%s is not a supported number", n.Value)
			}
			v := strconv.FormatFloat(x, 'g', -1, 64)
			if !strings.ContainsAny(v, ".eE") {
				v += ".0"
			}
			return &ast.BasicLit{Kind: token.FLOAT, Value: v, ValuePos: p}, nil
		}
		return nil, c.errorf(n, "invalid number %q", n.Value)
	default:
		return nil, c.errorf(n, "unsupported YAML tag %s", tag)
	}
}

func boolToken(b bool) token.Token {
	if b {
		return token.TRUE
	}
	return token.FALSE
}

// parseJSON converts one JSON document to CUE syntax with positions.
func parseJSON(name string, data []byte) (*document, *Error) {
	var probe any
	if err := json.Unmarshal(data, &probe); err != nil {
		off := int64(0)
		var se *json.SyntaxError
		if errors.As(err, &se) {
			off = se.Offset
		}
		// Offset counts the bytes read, the offending one included.
		line, col := lineCol(data, off-1)
		return nil, &Error{Pos: Position{File: name, Line: line, Column: col}, Message: "JSON syntax error: " + oneLine(strings.TrimPrefix(err.Error(), "json: "))}
	}
	expr, err := cuejson.Extract(name, data)
	if err != nil {
		return nil, &Error{Pos: Position{File: name, Line: 1, Column: 1}, Message: "JSON: " + oneLine(err.Error())}
	}
	if dup := duplicateKey(expr); dup != nil {
		return nil, dup
	}
	p := expr.Pos().Position()
	return &document{file: name, expr: expr, start: Position{File: name, Line: max(p.Line, 1), Column: max(p.Column, 1)}}, nil
}

// duplicateKey finds a key written twice in one JSON object.
func duplicateKey(e ast.Expr) *Error {
	switch x := e.(type) {
	case *ast.StructLit:
		seen := map[string]token.Pos{}
		for _, d := range x.Elts {
			f, ok := d.(*ast.Field)
			if !ok {
				continue
			}
			name, _, _ := ast.LabelName(f.Label)
			if first, ok := seen[name]; ok {
				return &Error{Pos: toPosition(f.Label.Pos()), Message: sprintf("key %q repeated (first at line %d)", name, first.Position().Line)}
			}
			seen[name] = f.Label.Pos()
			if err := duplicateKey(f.Value); err != nil {
				return err
			}
		}
	case *ast.ListLit:
		for _, v := range x.Elts {
			if err := duplicateKey(v); err != nil {
				return err
			}
		}
	}
	return nil
}

// lineCol converts a byte offset to a 1-based line and column.
func lineCol(data []byte, off int64) (int, int) {
	off = min(max(off, 0), int64(len(data)))
	before := data[:off]
	line := bytes.Count(before, []byte{'\n'}) + 1
	col := len(before) - (bytes.LastIndexByte(before, '\n') + 1) + 1
	return line, col
}
