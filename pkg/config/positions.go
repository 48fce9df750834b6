package config

import (
	"regexp"
	"strconv"
	"strings"

	"cuelang.org/go/cue/ast"
	"cuelang.org/go/cue/literal"
	"cuelang.org/go/cue/token"
)

// pathElem is one step of a user field path: a key or a list index.
type pathElem struct {
	key   string
	index int
	isIdx bool
}

// fieldPath is a user field path such as spec.agents[1].adapter.
type fieldPath []pathElem

func key(k string) pathElem { return pathElem{key: k} }
func index(i int) pathElem  { return pathElem{index: i, isIdx: true} }
func keys(ks ...string) fieldPath {
	p := make(fieldPath, len(ks))
	for i, k := range ks {
		p[i] = key(k)
	}
	return p
}

// with returns p extended by more elements, never sharing p's array.
func (p fieldPath) with(more ...pathElem) fieldPath {
	out := make(fieldPath, 0, len(p)+len(more))
	return append(append(out, p...), more...)
}

var identifier = regexp.MustCompile(`^[A-Za-z_$][A-Za-z0-9_-]*$`)

// String formats the path the way a user writes it: spec.agents[1].env["1X"].
func (p fieldPath) String() string {
	var b strings.Builder
	for i, e := range p {
		switch {
		case e.isIdx:
			b.WriteString("[" + strconv.Itoa(e.index) + "]")
		case identifier.MatchString(e.key):
			if i > 0 {
				b.WriteByte('.')
			}
			b.WriteString(e.key)
		default:
			b.WriteString("[" + strconv.Quote(e.key) + "]")
		}
	}
	return b.String()
}

// under reports whether p equals q or lies below it.
func (p fieldPath) under(q fieldPath) bool {
	if len(p) < len(q) {
		return false
	}
	for i := range q {
		if p[i] != q[i] {
			return false
		}
	}
	return true
}

// located is where a field path leads in a document's syntax.
type located struct {
	// found reports whether the whole path exists in the document.
	found bool
	// value is the node at the path (or at its deepest existing prefix).
	value ast.Expr
	// field is the field whose value that is, nil for list elements and
	// the document itself.
	field *ast.Field
	// depth is how many path elements exist in the document.
	depth int
}

// locate follows a path through a document's syntax.
func locate(doc ast.Expr, p fieldPath) located {
	l := located{value: doc}
	for _, e := range p {
		switch x := l.value.(type) {
		case *ast.StructLit:
			if e.isIdx {
				return l
			}
			var hit *ast.Field
			for _, d := range x.Elts {
				if f, ok := d.(*ast.Field); ok {
					if name, _, _ := ast.LabelName(f.Label); name == e.key {
						hit = f
					}
				}
			}
			if hit == nil {
				return l
			}
			l.field, l.value = hit, hit.Value
		case *ast.ListLit:
			if !e.isIdx || e.index < 0 || e.index >= len(x.Elts) {
				return l
			}
			l.field, l.value = nil, x.Elts[e.index]
		default:
			return l
		}
		l.depth++
	}
	l.found = true
	return l
}

// keyPos is the position of the key at the end of the located path (or of
// its deepest existing part); for list elements and documents the value's.
func (l located) keyPos() token.Pos {
	if l.field != nil {
		return l.field.Label.Pos()
	}
	return l.value.Pos()
}

// bestPos is the position to report a problem of the located value at:
// the value itself when it is a scalar, else its key.
func (l located) bestPos() token.Pos {
	if l.found {
		if _, ok := l.value.(*ast.BasicLit); ok {
			return l.value.Pos()
		}
	}
	return l.keyPos()
}

// toPosition converts a CUE position to a user position.
func toPosition(p token.Pos) Position {
	if !p.IsValid() {
		return Position{}
	}
	pp := p.Position()
	return Position{File: pp.Filename, Line: pp.Line, Column: pp.Column}
}

// posIn returns the user position of a problem at path p in doc, falling
// back to the document start.
func (d *document) posIn(p fieldPath, useKey bool) Position {
	l := locate(d.expr, p)
	var tp token.Pos
	if useKey {
		tp = l.keyPos()
	} else {
		tp = l.bestPos()
	}
	if pos := toPosition(tp); pos.File != "" {
		return pos
	}
	return d.start
}

// stringAt returns the string value at p in doc, if there is one.
func (d *document) stringAt(p fieldPath) (string, bool) {
	l := locate(d.expr, p)
	if !l.found {
		return "", false
	}
	lit, ok := l.value.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return "", false
	}
	s, err := literal.Unquote(lit.Value)
	if err != nil {
		return "", false
	}
	return s, true
}
