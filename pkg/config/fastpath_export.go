package config

import (
	"strings"
	"unicode/utf8"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/ast"
	"cuelang.org/go/cue/literal"
	"cuelang.org/go/cue/token"
)

// Fast path: the exporter (see package fastpath).
//
// Stands in for: CUE's Value.MarshalJSON of a valid Company or Settings
// document unified with its definition, which gives the document's JSON,
// defaults included, for decoding into the Model.
//
// Measured win: MarshalJSON orders the fields of every struct
// topologically, which cost 17 % of loading, more than the rest of the
// export together, and the Go model has no use for the order
// (docs/development/benchmarks.md, "What changed"; commits f754d7a and 6647345, which
// also took defaults from the schema). BenchmarkLoad in load_bench_test.go
// loads each fleet on both paths (path=fast, path=reference); on 2026-11-25,
// 1,000 companies at GOMAXPROCS=1: 1.01 s of CPU, 3.86M allocations and
// 333 MB with MarshalJSON, 0.80 s, 2.35M and 255 MB with the exporter.
//
// Equivalence test: fastpath_export_test.go: TestExportMatchesMarshalJSON
// (a corpus that uses every field of the schema in every form, every
// config in the repository, a configtest fleet and 300 random companies,
// document by document, with defaults from the schema and looked up) and
// TestLoadMatchesReference (the Model that Load gives for every config
// directory of the repository and configtest fleets).
//
// Reference switch: LoadOptions.Reference gives Load a Validator that
// exports with MarshalJSON (Validator.referencePath, worker.export).
//
// How it works. The exporter builds the same JSON as MarshalJSON (the same
// values; fields in another order) from the two things it is made of:
//
//   - what the document says: a concrete value unified with its schema is
//     that value, so strings, integers, booleans and nulls are copied from
//     the document's syntax, and a struct or list of the document keeps its
//     fields or elements;
//   - what the schema adds: the regular (non-optional) fields of a schema
//     struct that the document leaves out. When no field of the schema
//     refers to another (schemaFacts.staticDefaults), such a field's value
//     is the schema's own, exported once per worker; otherwise it is
//     exported from the unified value with MarshalJSON.
//
// To know which schema struct applies where, the exporter walks the
// definition alongside the document. Where that is not certain, it exports
// the unified value there with MarshalJSON: a place with more than one
// struct (or list) alternative (podSelector: *{app: ...} | {[string]:
// string}), a list with a fixed prefix ([#Port, ...#Port]), a struct or
// list value of a field that only a pattern constraint describes, a float
// (CUE writes its own number syntax), anything else. A schema with
// comprehensions (which add fields depending on data) is not walked at all
// (see readSchema). TestExportMatchesMarshalJSON also checks that
// evaluating #Kind & {document}, as the Validator does, gives what unifying
// the definition with the document gives.

// schemaNode is the schema at one place of a document kind, read lazily
// and kept by the worker.
type schemaNode struct {
	v cue.Value
	// static tells that the schema alone gives a left-out field its value
	// (schemaFacts.staticDefaults).
	static bool
	// readStruct and readList tell whether st, and elem and listOK, are
	// filled in.
	readStruct, readList bool
	st                   *structShape
	elem                 *schemaNode
	listOK               bool
}

// structShape is a schema struct: its declared fields (each with its
// schema) and which of them are regular, with their JSON when the schema
// alone decides it.
type structShape struct {
	fields  map[string]*schemaNode
	regular []string
	// defaults are the JSON of regular fields with a concrete value
	// (their default) in the schema, when schemaNode.static.
	defaults map[string][]byte
}

func newSchemaNode(v cue.Value, static bool) *schemaNode { return &schemaNode{v: v, static: static} }

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
	alt, ok := soleAlternative(n.v, cue.StructKind)
	if !ok {
		return nil
	}
	it, err := alt.Fields(cue.Optional(true))
	if err != nil {
		return nil
	}
	st := &structShape{fields: map[string]*schemaNode{}, defaults: map[string][]byte{}}
	for it.Next() {
		sel := it.Selector()
		if sel.LabelType() != cue.StringLabel {
			continue
		}
		name := sel.Unquoted()
		fv := it.Value()
		st.fields[name] = newSchemaNode(fv, n.static)
		if sel.ConstraintType() != 0 {
			continue
		}
		st.regular = append(st.regular, name)
		if n.static && fv.Validate(cue.Concrete(true), cue.Final()) == nil {
			if b, err := fv.MarshalJSON(); err == nil {
				st.defaults[name] = b
			}
		}
	}
	n.st = st
	return st
}

// soleAlternative returns the one alternative of v (one of its disjuncts)
// whose kind is exactly kind; ok is false when there is none, more than one,
// one in error, or one that may be of kind too (top, or a value in error).
func soleAlternative(v cue.Value, kind cue.Kind) (alt cue.Value, ok bool) {
	found := 0
	for _, a := range disjuncts(v) {
		k := a.IncompleteKind()
		switch {
		case k == kind:
			alt = a
			found++
		case k&kind != 0 || k == cue.BottomKind:
			return cue.Value{}, false
		}
	}
	return alt, found == 1 && alt.Err() == nil
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
	alt, ok := soleAlternative(n.v, cue.ListKind)
	if !ok || alt.LookupPath(cue.MakePath(cue.Index(0))).Exists() {
		return nil, false
	}
	if e := alt.LookupPath(cue.MakePath(cue.AnyIndex)); e.Exists() {
		n.elem = newSchemaNode(e, n.static)
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

// value appends the export of e, a document expression whose schema is n
// and whose unified value is lv.
func (x *exporter) value(e ast.Expr, n *schemaNode, lv *lazyValue) error {
	switch e := e.(type) {
	case *ast.BasicLit:
		return x.basicLit(e, lv)
	case *ast.StructLit:
		if st := n.structShape(); st != nil {
			return x.structLit(e, st, lv)
		}
	case *ast.ListLit:
		if elem, ok := n.listElem(); ok {
			return x.listLit(e, elem, lv)
		}
	}
	return x.marshal(lv)
}

// basicLit appends a scalar as the document writes it.
func (x *exporter) basicLit(e *ast.BasicLit, lv *lazyValue) error {
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
}

// structLit appends a struct: the document's fields in its order, then the
// schema's regular fields it left out.
func (x *exporter) structLit(e *ast.StructLit, st *structShape, lv *lazyValue) error {
	x.buf = append(x.buf, '{')
	var present map[string]bool
	if len(st.regular) > 0 {
		present = make(map[string]bool, len(e.Elts))
	}
	for i, d := range e.Elts {
		f, ok := d.(*ast.Field)
		if !ok {
			return errUnexpected
		}
		name, _, err := ast.LabelName(f.Label)
		if err != nil {
			return errUnexpected
		}
		if present != nil {
			present[name] = true
		}
		x.key(i > 0, name)
		if err := x.field(f, st, lv.child(cue.Str(name)), name); err != nil {
			return err
		}
	}
	first := len(e.Elts) == 0
	for _, name := range st.regular {
		if present[name] {
			continue
		}
		x.key(!first, name)
		first = false
		if b, ok := st.defaults[name]; ok {
			x.buf = append(x.buf, b...)
			continue
		}
		if err := x.marshal(lv.child(cue.Str(name))); err != nil {
			return err
		}
	}
	x.buf = append(x.buf, '}')
	return nil
}

// key appends a member's name and colon, after a comma unless it is the
// first.
func (x *exporter) key(comma bool, name string) {
	if comma {
		x.buf = append(x.buf, ',')
	}
	x.buf = appendJSONString(x.buf, name)
	x.buf = append(x.buf, ':')
}

// field appends the value of the document's field f named name.
func (x *exporter) field(f *ast.Field, st *structShape, child *lazyValue, name string) error {
	if fn, ok := st.fields[name]; ok {
		return x.value(f.Value, fn, child)
	}
	// A field that only a pattern constraint (or an open struct) allows: a
	// scalar is the document's; anything else is exported whole.
	if _, ok := f.Value.(*ast.BasicLit); ok {
		return x.value(f.Value, nil, child)
	}
	return x.marshal(child)
}

// listLit appends a list whose elements have the schema elem.
func (x *exporter) listLit(e *ast.ListLit, elem *schemaNode, lv *lazyValue) error {
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

// schemaFacts is what the exporter needs to know of the schema's syntax.
type schemaFacts struct {
	// exportable are the kinds whose definitions the exporter may walk:
	// those no comprehension (if, for) can reach, since a comprehension
	// adds fields that depend on the data.
	exportable map[string]bool
	// staticDefaults tells that no field of an exportable kind refers to
	// another field (only to definitions, imported packages and CUE's own
	// identifiers), so that a field a document leaves out has the value
	// the schema alone gives it.
	staticDefaults bool
}

// predeclared are CUE's own identifiers.
var predeclared = map[string]bool{
	"_": true, "bool": true, "int": true, "float": true, "number": true, "string": true, "bytes": true, "uint": true,
	"int8": true, "int16": true, "int32": true, "int64": true, "int128": true, "uint8": true, "uint16": true,
	"uint32": true, "uint64": true, "uint128": true, "float32": true, "float64": true, "rune": true,
	"len": true, "close": true, "and": true, "or": true, "div": true, "mod": true, "quo": true, "rem": true, "error": true,
}

// readSchema finds the schemaFacts in the schema's files. A comprehension
// is allowed only inside a top-level definition that nothing refers to
// (#Run), whose kind is then not exportable; one anywhere else leaves every
// kind out. References are looked at outside such definitions only.
func readSchema(files []*ast.File, kinds []string) schemaFacts {
	type decl struct {
		label string
		value ast.Node
	}
	var decls []decl
	imports := map[string]bool{}
	for _, f := range files {
		for _, spec := range f.Imports {
			path := strings.Trim(spec.Path.Value, `"`)
			name := path[strings.LastIndex(path, "/")+1:]
			if spec.Name != nil {
				name = spec.Name.Name
			}
			imports[name] = true
		}
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.Field:
				label, _, _ := ast.LabelName(d.Label)
				decls = append(decls, decl{label, d.Value})
			case *ast.Package, *ast.ImportDecl, *ast.CommentGroup:
			default:
				decls = append(decls, decl{"", d})
			}
		}
	}
	holders := map[string]bool{} // top-level definitions with a comprehension
	refs := map[string]bool{}    // identifiers referred to
	anywhere := false
	for _, d := range decls {
		walkValues(d.value, func(n ast.Node) {
			switch n := n.(type) {
			case *ast.Comprehension:
				if strings.HasPrefix(d.label, "#") {
					holders[d.label] = true
				} else {
					anywhere = true
				}
			case *ast.Ident:
				refs[n.Name] = true
			}
		})
	}
	for def := range holders {
		if refs[def] {
			anywhere = true
		}
	}
	facts := schemaFacts{exportable: map[string]bool{}}
	if anywhere {
		return facts
	}
	for _, k := range kinds {
		if !holders["#"+k] {
			facts.exportable[k] = true
		}
	}
	facts.staticDefaults = true
	for _, d := range decls {
		if holders[d.label] {
			continue
		}
		walkValues(d.value, func(n ast.Node) {
			switch n := n.(type) {
			case *ast.Ident:
				if !strings.HasPrefix(n.Name, "#") && !predeclared[n.Name] && !imports[n.Name] {
					facts.staticDefaults = false
				}
			case *ast.LetClause, *ast.Alias:
				facts.staticDefaults = false
			}
		})
	}
	return facts
}

// walkValues calls fn for every node of a value's syntax, leaving out
// field labels and the selected names of selector expressions (pkg.Name),
// which are not references.
func walkValues(n ast.Node, fn func(ast.Node)) {
	ast.Walk(n, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.Field:
			// A dynamic label ((expr): v) or a pattern ([expr]: v) refers
			// to things; a plain one does not.
			switch l := n.Label.(type) {
			case *ast.ParenExpr, *ast.ListLit:
				walkValues(l, fn)
			case *ast.Interpolation:
				walkValues(l, fn)
			}
			walkValues(n.Value, fn)
			return false
		case *ast.SelectorExpr:
			walkValues(n.X, fn)
			return false
		}
		fn(n)
		return true
	}, nil)
}
