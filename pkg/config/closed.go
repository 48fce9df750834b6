package config

import (
	"cuelang.org/go/cue"
	"cuelang.org/go/cue/ast"
)

// notAllowed walks a document alongside its schema definition and finds
// every field the schema does not allow. CUE reports a closedness error
// only when nothing else is wrong nearby, so the validator asks the
// schema itself (Allows) for every field of an invalid document.
func notAllowed(def cue.Value, expr ast.Expr) []issue {
	var out []issue
	walkClosed([]cue.Value{def}, expr, nil, &out)
	return out
}

func walkClosed(schemas []cue.Value, e ast.Expr, p fieldPath, out *[]issue) {
	switch x := e.(type) {
	case *ast.StructLit:
		cands := structCandidates(schemas)
		if len(cands) == 0 {
			return
		}
		for _, d := range x.Elts {
			f, ok := d.(*ast.Field)
			if !ok {
				continue
			}
			name, _, _ := ast.LabelName(f.Label)
			sel := cue.Str(name)
			var next []cue.Value
			for _, c := range cands {
				if !allows(c, sel) {
					continue
				}
				if v := c.LookupPath(cue.MakePath(sel)); v.Exists() {
					next = append(next, v)
				} else if v := c.LookupPath(cue.MakePath(cue.AnyString)); v.Exists() {
					next = append(next, v)
				}
			}
			fp := p.with(key(name))
			if len(next) == 0 && !anyAllows(cands, sel) {
				*out = append(*out, issue{path: fp, msg: "field not allowed", atKey: true})
				continue
			}
			walkClosed(next, f.Value, fp, out)
		}
	case *ast.ListLit:
		var elems []cue.Value
		for _, s := range schemas {
			for _, c := range disjuncts(s) {
				if c.IncompleteKind()&cue.ListKind == 0 {
					continue
				}
				if v := c.LookupPath(cue.MakePath(cue.AnyIndex)); v.Exists() {
					elems = append(elems, v)
				}
			}
		}
		for i, el := range x.Elts {
			walkClosed(elems, el, p.with(index(i)), out)
		}
	}
}

func anyAllows(cands []cue.Value, sel cue.Selector) bool {
	for _, c := range cands {
		if allows(c, sel) {
			return true
		}
	}
	return false
}

// allows reports whether schema struct c allows the field sel. A struct
// that is itself incomplete (#Run, whose size check needs a prompt) says
// nothing through Allows; its declared fields answer instead.
func allows(c cue.Value, sel cue.Selector) bool {
	if c.Err() == nil {
		return c.Allows(sel)
	}
	it, err := c.Fields(cue.Optional(true))
	if err != nil {
		return true
	}
	for it.Next() {
		if it.Selector().Unquoted() == sel.Unquoted() {
			return true
		}
	}
	return false
}

// structCandidates are the struct alternatives among schemas.
func structCandidates(schemas []cue.Value) []cue.Value {
	var out []cue.Value
	for _, s := range schemas {
		for _, c := range disjuncts(s) {
			// A struct in error (see allows) has no kind left.
			if k := c.IncompleteKind(); k&cue.StructKind != 0 || k == cue.BottomKind {
				out = append(out, c)
			}
		}
	}
	return out
}

// disjuncts splits a disjunction (a | b | *c) into its alternatives.
func disjuncts(v cue.Value) []cue.Value {
	if op, args := v.Expr(); op == cue.OrOp {
		var out []cue.Value
		for _, a := range args {
			out = append(out, disjuncts(a)...)
		}
		return out
	}
	return []cue.Value{v}
}
