package config

import (
	"encoding/json"
	"fmt"
	"runtime"
	"sync"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/ast"
	"cuelang.org/go/cue/cuecontext"
	"cuelang.org/go/cue/parser"
	"cuelang.org/go/cue/token"

	"github.com/pcsync/pcsync/schema"
)

// Validator checks documents against pcsync's CUE schema. A cue.Context is
// not safe for concurrent use, so the Validator keeps a small pool of
// independent contexts, each with the schema compiled once, and lends each
// to one goroutine at a time. A Validator is safe for concurrent use.
type Validator struct {
	*validatorPool
	// reference exports every valid document with MarshalJSON, the
	// reference of the exporter (fastpath_export.go): LoadOptions.Reference.
	reference bool
}

// validatorPool is what the Validators made by one NewValidator share: the
// CUE contexts and what was read from the schema.
type validatorPool struct {
	mu      sync.Mutex
	free    []*worker
	created int
	limit   int
	wake    *sync.Cond
	// builtin is the schema's built-in adapter defaults, read once.
	builtin map[AdapterType]AdapterDefaults
	// defaultSettings is the Settings that an empty document gets.
	defaultSettings Settings
	// facts tell which kinds' valid documents the exporter (see
	// fastpath_export.go) turns into JSON; the others use MarshalJSON.
	facts schemaFacts
}

// referencePath returns a Validator that shares v's CUE contexts and
// exports every valid document with MarshalJSON.
func (v *Validator) referencePath() *Validator {
	return &Validator{validatorPool: v.validatorPool, reference: true}
}

// recycleAfter is how many documents a CUE context validates before it is
// replaced: a context keeps every label it has seen, so a long-running
// daemon would otherwise grow without bound.
const recycleAfter = 20000

// maxRounds bounds how often a document is re-validated with its faulty
// fields removed, to find the errors that CUE hides behind others.
const maxRounds = 6

// worker is one CUE context with the compiled schema.
type worker struct {
	ctx  *cue.Context
	defs map[string]cue.Value
	root cue.Value
	uses int
	// shapes are the definitions of the exportable kinds as the exporter
	// walks them, read as documents need them.
	shapes map[string]*schemaNode
	// refs are the identifiers of the kinds' definitions in the schema's
	// scope (#Company).
	refs map[string]string
}

// NewValidator compiles the schema. Concurrency is the most CUE contexts it
// uses at once; 0 means GOMAXPROCS.
func NewValidator(concurrency int) (*Validator, error) {
	return newValidator(concurrency, exportFull)
}

// exportMode says how the exporter (see fastpath_export.go) finds the
// values of left-out fields.
type exportMode int

const (
	// exportLookup looks every left-out field up in the unified value.
	exportLookup exportMode = iota
	// exportFull takes them from the schema when the schema allows.
	exportFull
)

// newValidator is NewValidator with a choice of export, for tests.
func newValidator(concurrency int, export exportMode) (*Validator, error) {
	if concurrency <= 0 {
		concurrency = runtime.GOMAXPROCS(0)
	}
	v := &Validator{validatorPool: &validatorPool{limit: concurrency}}
	v.wake = sync.NewCond(&v.mu)
	files, err := schemaSyntax()
	if err != nil {
		return nil, err
	}
	v.facts = readSchema(files, schema.Kinds())
	v.facts.staticDefaults = v.facts.staticDefaults && export == exportFull
	w, err := v.newWorker()
	if err != nil {
		return nil, err
	}
	b, err := w.root.LookupPath(schema.AdapterDefaults()).MarshalJSON()
	if err != nil {
		return nil, fmt.Errorf("schema: adapter defaults: %w", err)
	}
	if err := json.Unmarshal(b, &v.builtin); err != nil {
		return nil, fmt.Errorf("schema: adapter defaults: %w", err)
	}
	empty := &ast.StructLit{Elts: []ast.Decl{
		&ast.Field{Label: ast.NewString("apiVersion"), Value: ast.NewString(APIVersion)},
		&ast.Field{Label: ast.NewString("kind"), Value: ast.NewString("Settings")},
		&ast.Field{Label: ast.NewString("metadata"), Value: ast.NewStruct(ast.NewString("name"), ast.NewString("default"))},
	}}
	// On the reference path, for every Validator: it is one document.
	out, errs := w.check("Settings", &document{file: "(defaults)", expr: empty}, true)
	if len(errs) > 0 {
		return nil, fmt.Errorf("schema: default settings: %s", errs[0].Message)
	}
	if err := json.Unmarshal(out, &v.defaultSettings); err != nil {
		return nil, fmt.Errorf("schema: default settings: %w", err)
	}
	v.created = 1
	v.free = append(v.free, w)
	return v, nil
}

func (v *Validator) newWorker() (*worker, error) {
	ctx := cuecontext.New()
	root, err := schema.Compile(ctx)
	if err != nil {
		return nil, err
	}
	w := &worker{ctx: ctx, root: root, defs: map[string]cue.Value{}, shapes: map[string]*schemaNode{}, refs: map[string]string{}}
	for _, k := range schema.Kinds() {
		p, _ := schema.Definition(k)
		w.defs[k] = root.LookupPath(p)
		if sels := p.Selectors(); len(sels) == 1 && sels[0].IsDefinition() {
			w.refs[k] = sels[0].String()
		}
		if v.facts.exportable[k] {
			w.shapes[k] = newSchemaNode(w.defs[k], v.facts.staticDefaults)
		}
	}
	return w, nil
}

// schemaSyntax parses the schema's files.
func schemaSyntax() ([]*ast.File, error) {
	srcs, err := schema.Sources()
	if err != nil {
		return nil, err
	}
	var files []*ast.File
	for name, src := range srcs {
		f, err := parser.ParseFile(name, src)
		if err != nil {
			return nil, fmt.Errorf("schema: parse %s: %w", name, err)
		}
		files = append(files, f)
	}
	return files, nil
}

// get lends a worker, creating one while fewer than the limit exist.
func (v *Validator) get() (*worker, error) {
	v.mu.Lock()
	for {
		if n := len(v.free); n > 0 {
			w := v.free[n-1]
			v.free = v.free[:n-1]
			v.mu.Unlock()
			return w, nil
		}
		if v.created < v.limit {
			v.created++
			v.mu.Unlock()
			w, err := v.newWorker()
			if err != nil {
				v.mu.Lock()
				v.created--
				v.mu.Unlock()
				v.wake.Signal()
				return nil, err
			}
			return w, nil
		}
		v.wake.Wait()
	}
}

// put returns a worker; a worn-out one is dropped.
func (v *Validator) put(w *worker) {
	v.mu.Lock()
	if w.uses >= recycleAfter {
		v.created--
	} else {
		v.free = append(v.free, w)
	}
	v.mu.Unlock()
	v.wake.Signal()
}

// validate checks a document against the definition of kind and returns
// its JSON with the schema's defaults, or the problems found.
func (v *Validator) validate(kind string, doc *document) ([]byte, []*Error) {
	w, err := v.get()
	if err != nil {
		return nil, []*Error{{Pos: doc.start, Message: err.Error()}}
	}
	defer v.put(w)
	return w.check(kind, doc, v.reference)
}

// check validates doc in w's context. When the document is invalid it is
// validated again with the faulty fields removed, because CUE reports some
// errors (a field not allowed, a required field missing) only when nothing
// else is wrong nearby; every round's new errors are kept. A valid
// document's JSON comes from the exporter, or with reference from
// MarshalJSON.
func (w *worker) check(kind string, doc *document, reference bool) ([]byte, []*Error) {
	w.uses++
	def, ok := w.defs[kind]
	if !ok {
		return nil, []*Error{{Pos: doc.start, Field: "kind", Message: fmt.Sprintf("no schema for kind %q", kind)}}
	}
	var (
		known []fieldPath
		errs  []*Error
		expr  = doc.expr
	)
	if ref := w.refs[kind]; ref != "" {
		// Most documents are valid: evaluate the definition and the
		// document as one expression (#Kind & {...}), which spares CUE
		// from evaluating the document alone first. An invalid one is
		// evaluated again below, the way its errors have always been
		// found.
		val := w.ctx.BuildExpr(&ast.BinaryExpr{Op: token.AND, X: ast.NewIdent(ref), Y: expr}, cue.Scope(w.root))
		if val.Validate(cue.Concrete(true), cue.All()) == nil {
			if b, ok := w.export(kind, doc, val, reference); ok {
				return b, nil
			}
		}
	}
	for round := 0; round < maxRounds; round++ {
		data := w.ctx.BuildExpr(expr)
		if err := data.Err(); err != nil {
			return nil, append(errs, &Error{Pos: doc.start, Message: "cannot read document: " + oneLine(err.Error())})
		}
		val := def.Unify(data)
		err := val.Validate(cue.Concrete(true), cue.All())
		if err == nil {
			if round > 0 {
				break
			}
			if b, ok := w.export(kind, doc, val, reference); ok {
				return b, nil
			}
			b, err := val.MarshalJSON()
			if err != nil {
				return nil, []*Error{{Pos: doc.start, Message: "cannot export document: " + oneLine(err.Error())}}
			}
			return b, nil
		}
		var fresh []fieldPath
		issues := issuesOf(err, expr)
		if round == 0 {
			issues = append(issues, notAllowed(def, expr)...)
			issues = append(issues, missingTopLevel(def, expr)...)
		}
		for _, is := range issues {
			if underAny(is.path, known) {
				continue
			}
			known = append(known, is.path)
			fresh = append(fresh, is.path)
			errs = append(errs, &Error{Pos: doc.posIn(is.path, is.atKey), Field: is.path.String(), Message: is.msg})
		}
		if len(fresh) == 0 {
			break
		}
		for _, p := range fresh {
			expr = prune(expr, p)
		}
	}
	if len(errs) == 0 {
		// Unreachable in practice: an invalid document with no issue.
		errs = append(errs, &Error{Pos: doc.start, Message: "document is invalid"})
	}
	return nil, errs
}

// export returns the JSON of a valid document with the exporter (unless
// reference is set) or MarshalJSON; false when that fails (check then
// reports the error).
func (w *worker) export(kind string, doc *document, val cue.Value, reference bool) ([]byte, bool) {
	if shape := w.shapes[kind]; shape != nil && !reference {
		if b, err := exportDocument(shape, doc, val); err == nil {
			return b, true
		}
	}
	b, err := val.MarshalJSON()
	return b, err == nil
}

func underAny(p fieldPath, known []fieldPath) bool {
	for _, k := range known {
		if p.under(k) {
			return true
		}
	}
	return false
}

// prune returns a copy of e without the value at p: a field is removed, a
// list element becomes top (_), so that later indexes keep their meaning.
func prune(e ast.Expr, p fieldPath) ast.Expr {
	if len(p) == 0 {
		return ast.NewIdent("_")
	}
	switch x := e.(type) {
	case *ast.StructLit:
		if p[0].isIdx {
			return e
		}
		n := &ast.StructLit{Lbrace: x.Lbrace, Elts: make([]ast.Decl, 0, len(x.Elts))}
		for _, d := range x.Elts {
			f, ok := d.(*ast.Field)
			if !ok {
				n.Elts = append(n.Elts, d)
				continue
			}
			if name, _, _ := ast.LabelName(f.Label); name != p[0].key {
				n.Elts = append(n.Elts, d)
				continue
			}
			if len(p) == 1 {
				continue
			}
			nf := *f
			nf.Value = prune(f.Value, p[1:])
			n.Elts = append(n.Elts, &nf)
		}
		return n
	case *ast.ListLit:
		if !p[0].isIdx || p[0].index >= len(x.Elts) {
			return e
		}
		n := &ast.ListLit{Lbrack: x.Lbrack, Elts: append([]ast.Expr(nil), x.Elts...)}
		n.Elts[p[0].index] = prune(x.Elts[p[0].index], p[1:])
		return n
	}
	return e
}

// missingTopLevel finds the document's required top-level fields that are
// absent: CUE does not always report them when another error is present
// (a constraint that needs the missing value fails first).
func missingTopLevel(def cue.Value, expr ast.Expr) []issue {
	var out []issue
	it, err := def.Fields()
	if err != nil {
		return nil
	}
	for it.Next() {
		name := it.Selector().Unquoted()
		if locate(expr, fieldPath{key(name)}).found {
			continue
		}
		v := it.Value()
		if _, ok := v.Default(); ok || v.IsConcrete() || v.IncompleteKind() == cue.StructKind {
			continue
		}
		out = append(out, issue{path: fieldPath{key(name)}, msg: "field is required", atKey: true})
	}
	return out
}
