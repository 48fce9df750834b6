package config

import (
	"strings"
	"unicode/utf8"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/ast"
	"cuelang.org/go/cue/literal"
	"cuelang.org/go/cue/token"
)

// Exporting a valid document
//
// A valid document's JSON, defaults included, is what Value.MarshalJSON
// gives for the document unified with its definition. MarshalJSON orders
// the fields of every struct topologically, which costs more than the rest
// of the export together, and the Go model has no use for the order. The
// exporter builds the same JSON (the same values; fields in another order)
// from the two things it is made of:
//
//   - what the document says: a concrete value unified with its schema is
//     that value, so strings, integers, booleans and nulls are copied from
//     the document's syntax, and a struct or list of the document keeps its
//     fields or elements;
//   - what the schema adds: the regular (non-optional) fields of a schema
//     struct that the document leaves out. Each is exported from the
//     unified value with MarshalJSON, which gives its default.
//
// To know which schema struct applies where, the exporter walks the
// definition alongside the document. Where that is not certain, it exports
// the unified value there with MarshalJSON: a place with more than one
// struct (or list) alternative (podSelector: *{app: ...} | {[string]:
// string}), a list with a fixed prefix ([#Port, ...#Port]), a struct or
// list value of a field that only a pattern constraint describes, a float
// (CUE writes its own number syntax), anything else. A schema with
// comprehensions (which add fields depending on data) is not walked at all
// (see exportable). TestExportMatchesMarshalJSON checks the two exports
// decode to the same values.

// schemaNode is the schema at one place of a document kind, read lazily
// and kept by the worker.
type schemaNode struct {
	v cue.Value
	// readStruct and readList tell whether st, and elem and listOK, are
	// filled in.
	readStruct, readList bool
	st                   *structShape
	elem                 *schemaNode
	listOK               bool
}

// structShape is a schema struct: its declared fields (each with its
// schema) and which of them are regular.
type structShape struct {
	fields  map[string]*schemaNode
	regular []string
}

func newSchemaNode(v cue.Value) *schemaNode { return &schemaNode{v: v} }

// structShape returns the one struct the schema allows here, or nil when
// there is not exactly one.
func (n *schemaNode) structShape() *structShape {
	if n == nil {
		return nil
	}
	if n.readStruct {
		return n.st
	}
	n.readStruct = true
	var alt cue.Value
	found := 0
	for _, a := range disjuncts(n.v) {
		k := a.IncompleteKind()
		switch {
		case k == cue.StructKind:
			alt = a
			found++
		case k&cue.StructKind != 0 || k == cue.BottomKind:
			// Top, or a value in error: may be a struct too.
			return nil
		}
	}
	if found != 1 || alt.Err() != nil {
		return nil
	}
	it, err := alt.Fields(cue.Optional(true))
	if err != nil {
		return nil
	}
	st := &structShape{fields: map[string]*schemaNode{}}
	for it.Next() {
		sel := it.Selector()
		if sel.LabelType() != cue.StringLabel {
			continue
		}
		name := sel.Unquoted()
		st.fields[name] = newSchemaNode(it.Value())
		if sel.ConstraintType() == 0 {
			st.regular = append(st.regular, name)
		}
	}
	n.st = st
	return st
}

// listElem returns the schema of the elements of the one open list the
// schema allows here; ok is false when there is not exactly one such list.
// elem is nil for a closed empty list.
func (n *schemaNode) listElem() (elem *schemaNode, ok bool) {
	if n == nil {
		return nil, false
	}
	if n.readList {
		return n.elem, n.listOK
	}
	n.readList = true
	var alt cue.Value
	found := 0
	for _, a := range disjuncts(n.v) {
		k := a.IncompleteKind()
		switch {
		case k == cue.ListKind:
			alt = a
			found++
		case k&cue.ListKind != 0 || k == cue.BottomKind:
			return nil, false
		}
	}
	if found != 1 || alt.Err() != nil || alt.LookupPath(cue.MakePath(cue.Index(0))).Exists() {
		return nil, false
	}
	if e := alt.LookupPath(cue.MakePath(cue.AnyIndex)); e.Exists() {
		n.elem = newSchemaNode(e)
	}
	n.listOK = true
	return n.elem, true
}

// lazyValue is the unified value at a place of the document, looked up
// only when the exporter needs it.
type lazyValue struct {
	parent *lazyValue
	sel    cue.Selector
	v      cue.Value
	done   bool
}

func (l *lazyValue) get() cue.Value {
	if !l.done {
		l.v = l.parent.get().LookupPath(cue.MakePath(l.sel))
		l.done = true
	}
	return l.v
}

func (l *lazyValue) child(sel cue.Selector) *lazyValue {
	return &lazyValue{parent: l, sel: sel}
}

// exporter builds a valid document's JSON; see above.
type exporter struct {
	buf []byte
}

// export returns the JSON of doc, valid against the schema root, whose
// unified value is val.
func exportDocument(root *schemaNode, doc *document, val cue.Value) ([]byte, error) {
	x := &exporter{buf: make([]byte, 0, 1024)}
	if err := x.value(doc.expr, root, &lazyValue{v: val, done: true}); err != nil {
		return nil, err
	}
	return x.buf, nil
}

// marshal appends the unified value's own export.
func (x *exporter) marshal(lv *lazyValue) error {
	b, err := lv.get().MarshalJSON()
	if err != nil {
		return err
	}
	x.buf = append(x.buf, b...)
	return nil
}

func (x *exporter) value(e ast.Expr, n *schemaNode, lv *lazyValue) error {
	switch e := e.(type) {
	case *ast.BasicLit:
		switch e.Kind {
		case token.STRING:
			s, err := literal.Unquote(e.Value)
			if err != nil {
				return x.marshal(lv)
			}
			x.buf = appendJSONString(x.buf, s)
		case token.INT:
			// The converter writes integers in decimal, as CUE exports them.
			x.buf = append(x.buf, e.Value...)
		case token.TRUE, token.FALSE, token.NULL:
			x.buf = append(x.buf, e.Value...)
		default:
			return x.marshal(lv)
		}
		return nil
	case *ast.StructLit:
		st := n.structShape()
		if st == nil {
			return x.marshal(lv)
		}
		x.buf = append(x.buf, '{')
		first := true
		var present map[string]bool
		if len(st.regular) > 0 {
			present = make(map[string]bool, len(e.Elts))
		}
		for _, d := range e.Elts {
			f, ok := d.(*ast.Field)
			if !ok {
				return errUnexpected
			}
			name, _, err := ast.LabelName(f.Label)
			if err != nil {
				return errUnexpected
			}
			if !first {
				x.buf = append(x.buf, ',')
			}
			first = false
			if present != nil {
				present[name] = true
			}
			x.buf = appendJSONString(x.buf, name)
			x.buf = append(x.buf, ':')
			child := lv.child(cue.Str(name))
			if fn, ok := st.fields[name]; ok {
				if err := x.value(f.Value, fn, child); err != nil {
					return err
				}
				continue
			}
			// A field that only a pattern constraint (or an open struct)
			// allows: a scalar is the document's; anything else is
			// exported whole.
			if _, ok := f.Value.(*ast.BasicLit); ok {
				if err := x.value(f.Value, nil, child); err != nil {
					return err
				}
				continue
			}
			if err := x.marshal(child); err != nil {
				return err
			}
		}
		for _, name := range st.regular {
			if present[name] {
				continue
			}
			if !first {
				x.buf = append(x.buf, ',')
			}
			first = false
			x.buf = appendJSONString(x.buf, name)
			x.buf = append(x.buf, ':')
			if err := x.marshal(lv.child(cue.Str(name))); err != nil {
				return err
			}
		}
		x.buf = append(x.buf, '}')
		return nil
	case *ast.ListLit:
		elem, ok := n.listElem()
		if !ok {
			return x.marshal(lv)
		}
		x.buf = append(x.buf, '[')
		for i, el := range e.Elts {
			if i > 0 {
				x.buf = append(x.buf, ',')
			}
			if err := x.value(el, elem, lv.child(cue.Index(i))); err != nil {
				return err
			}
		}
		x.buf = append(x.buf, ']')
		return nil
	}
	return x.marshal(lv)
}

// errUnexpected reports a document syntax the exporter does not know; the
// caller then exports with MarshalJSON.
var errUnexpected = &Error{Message: "unexpected document syntax"}

// appendJSONString appends s as a JSON string.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			i++
			continue
		}
		if c < utf8.RuneSelf {
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, `\u00`...)
				b = append(b, "0123456789abcdef"[c>>4], "0123456789abcdef"[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// exportableKinds returns the document kinds whose definitions the
// exporter may walk: those no comprehension (if, for) can reach, since a
// comprehension adds fields that depend on the data. It reads the schema's
// syntax: a comprehension is allowed only inside a top-level definition
// that nothing refers to (#Run), and that kind is then left out; one
// anywhere else leaves every kind out.
func exportableKinds(files []*ast.File, kinds []string) map[string]bool {
	holders := map[string]bool{} // top-level definitions with a comprehension
	refs := map[string]bool{}    // identifiers referred to anywhere
	anywhere := false
	for _, f := range files {
		for _, d := range f.Decls {
			label := ""
			var body ast.Node = d
			if fd, ok := d.(*ast.Field); ok {
				label, _, _ = ast.LabelName(fd.Label)
				body = fd.Value
			}
			ast.Walk(body, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.Comprehension:
					if strings.HasPrefix(label, "#") {
						holders[label] = true
					} else {
						anywhere = true
					}
				case *ast.Ident:
					refs[n.Name] = true
				}
				return true
			}, nil)
		}
	}
	out := map[string]bool{}
	for def := range holders {
		if refs[def] {
			anywhere = true
		}
	}
	if anywhere {
		return out
	}
	for _, k := range kinds {
		if !holders["#"+k] {
			out[k] = true
		}
	}
	return out
}
