// Package jsonschema exports the config documents' JSON Schema from pcsync's
// CUE schema, so that editors (the YAML language server) can validate and
// complete config files. The CUE schema stays the single source of truth:
// this package only translates it, definition by definition.
package jsonschema

import (
	"encoding/json"
	"fmt"
	"strings"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/cuecontext"

	"github.com/pcsync/pcsync/schema"
)

// ID is the $id of the exported schema document.
const ID = "https://pcsync.io/schemas/v1alpha1/config.json"

// Options control the export.
type Options struct {
	// Kinds are the document kinds the top-level schema accepts; each is
	// selected by its `kind` field.
	Kinds []string
	// Indent is the JSON indentation; empty writes compact JSON.
	Indent string
}

// DefaultOptions exports the config kinds, Settings and Company, indented.
func DefaultOptions() Options {
	return Options{Kinds: []string{"Settings", "Company"}, Indent: "  "}
}

// Export returns a JSON Schema (draft 2020-12) document whose top level
// accepts any of opts.Kinds, with the CUE definitions under $defs. Defaults,
// enums, patterns, bounds and descriptions come from the CUE schema.
func Export(opts Options) ([]byte, error) {
	ctx := cuecontext.New()
	root, err := schema.Compile(ctx)
	if err != nil {
		return nil, err
	}
	c := &converter{root: root, defs: map[string]any{}}
	var oneOf []any
	for _, k := range opts.Kinds {
		p, ok := schema.Definition(k)
		if !ok {
			return nil, fmt.Errorf("json schema: kind %q has no definition in the CUE schema", k)
		}
		c.define(p.String())
		oneOf = append(oneOf, ref(p.String()))
	}
	if c.err != nil {
		return nil, c.err
	}
	out := map[string]any{
		"$schema":     "https://json-schema.org/draft/2020-12/schema",
		"$id":         ID,
		"title":       "pcsync config document",
		"description": "A pcsync config document (" + strings.Join(opts.Kinds, " or ") + "), generated from pcsync's CUE schema.",
		"oneOf":       oneOf,
		"$defs":       c.defs,
	}
	if opts.Indent == "" {
		return json.Marshal(out)
	}
	return json.MarshalIndent(out, "", opts.Indent)
}

func ref(def string) map[string]any {
	return map[string]any{"$ref": "#/$defs/" + strings.TrimPrefix(def, "#")}
}

// converter turns CUE values into JSON Schema objects. Definitions met by
// reference are converted once into defs.
type converter struct {
	root cue.Value
	defs map[string]any
	err  error
}

func (c *converter) define(def string) {
	name := strings.TrimPrefix(def, "#")
	if _, ok := c.defs[name]; ok {
		return
	}
	c.defs[name] = nil // mark before converting, for recursive definitions
	v := c.root.LookupPath(cue.ParsePath(def))
	if !v.Exists() {
		c.fail(fmt.Errorf("json schema: definition %s not found", def))
		return
	}
	c.defs[name] = c.convert(v, true)
}

func (c *converter) fail(err error) {
	if c.err == nil {
		c.err = err
	}
}

// convert returns the schema of v. top is true for a definition's own body,
// which must be expanded rather than turned into a $ref to itself.
func (c *converter) convert(v cue.Value, top bool) map[string]any {
	if !top {
		if def, ok := definitionRef(v); ok {
			c.define(def)
			s := ref(def)
			addDefault(s, v)
			addDescription(s, v)
			return s
		}
	}
	s := map[string]any{}
	op, args := v.Expr()
	switch op {
	case cue.OrOp:
		var alts []any
		for _, a := range args {
			alts = append(alts, c.convert(a, false))
		}
		s["anyOf"] = alts
	case cue.AndOp:
		var parts []any
		for _, a := range args {
			if def, ok := definitionRef(a); ok {
				c.define(def)
				parts = append(parts, ref(def))
				continue
			}
			part := c.convert(a, false)
			if len(part) > 0 {
				parts = append(parts, part)
			}
		}
		merged, ok := mergeAll(parts)
		if ok {
			s = merged
		} else {
			s["allOf"] = parts
		}
	case cue.NoOp:
		// A disjunction whose default is subsumed by its other arm (*1 |
		// int & >=1) comes back as that arm alone; the default stays on v.
		if len(args) == 1 && !args[0].Equals(v) {
			if op2, _ := args[0].Expr(); op2 != cue.NoOp {
				s = c.convert(args[0], top)
				break
			}
		}
		c.basic(s, v, op, args)
	default:
		c.basic(s, v, op, args)
	}
	addDefault(s, v)
	addDescription(s, v)
	return s
}

// basic converts a value that is neither a conjunction nor a disjunction.
func (c *converter) basic(s map[string]any, v cue.Value, op cue.Op, args []cue.Value) {
	switch op {
	case cue.RegexMatchOp:
		if p, err := args[0].String(); err == nil {
			s["type"] = "string"
			s["pattern"] = p
		}
		return
	case cue.GreaterThanEqualOp, cue.GreaterThanOp, cue.LessThanEqualOp, cue.LessThanOp:
		if n, err := args[0].Float64(); err == nil {
			key := map[cue.Op]string{cue.GreaterThanEqualOp: "minimum", cue.GreaterThanOp: "exclusiveMinimum",
				cue.LessThanEqualOp: "maximum", cue.LessThanOp: "exclusiveMaximum"}[op]
			s[key] = n
		}
		return
	case cue.CallOp:
		c.call(s, args)
		return
	}
	if v.IsConcrete() && v.Kind() != cue.StructKind && v.Kind() != cue.ListKind {
		var x any
		if err := v.Decode(&x); err == nil {
			s["const"] = x
		}
		return
	}
	switch k := v.IncompleteKind(); {
	case k == cue.StringKind:
		s["type"] = "string"
	case k == cue.IntKind:
		s["type"] = "integer"
	case k == cue.BoolKind:
		s["type"] = "boolean"
	case k&cue.NumberKind != 0 && k&^cue.NumberKind == 0:
		s["type"] = "number"
	case k == cue.StructKind:
		c.object(s, v)
	case k == cue.ListKind:
		c.array(s, v)
	}
}

// call converts the few builtin validators the schema uses.
func (c *converter) call(s map[string]any, args []cue.Value) {
	if len(args) < 2 {
		return
	}
	name := fmt.Sprint(args[0])
	n, err := args[1].Int64()
	if err != nil {
		return
	}
	switch {
	case strings.HasSuffix(name, "MinRunes"):
		s["type"], s["minLength"] = "string", n
	case strings.HasSuffix(name, "MaxRunes"):
		s["type"], s["maxLength"] = "string", n
	}
}

func (c *converter) object(s map[string]any, v cue.Value) {
	s["type"] = "object"
	props := map[string]any{}
	var required []string
	it, err := v.Fields(cue.Optional(true))
	if err != nil {
		c.fail(fmt.Errorf("json schema: %s: %w", v.Path(), err))
		return
	}
	for it.Next() {
		name := it.Selector().Unquoted()
		fv := it.Value()
		props[name] = c.convert(fv, false)
		if _, hasDefault := fv.Default(); !it.IsOptional() && !hasDefault && !fv.IsConcrete() {
			required = append(required, name)
		}
	}
	if len(props) > 0 {
		s["properties"] = props
	}
	if len(required) > 0 {
		s["required"] = required
	}
	if pv := v.LookupPath(cue.MakePath(cue.AnyString)); pv.Exists() {
		s["additionalProperties"] = c.convert(pv, false)
	} else if pv, ok := patternValue(v); ok {
		// A pattern constraint on the keys, such as {[#EnvName]: string}:
		// JSON Schema gets the value type; pcsync checks the keys.
		s["additionalProperties"] = c.convert(pv, false)
	} else if !v.Allows(cue.Str("_pcsync_unknown_field_")) {
		s["additionalProperties"] = false
	}
}

// patternValue finds the value a key pattern gives a field of a struct that
// has no regular fields, by probing keys of the shapes the schema uses.
func patternValue(v cue.Value) (cue.Value, bool) {
	for _, probe := range []string{"A", "claude_local", "a"} {
		if !v.Allows(cue.Str(probe)) {
			continue
		}
		p := cue.MakePath(cue.Str(probe))
		f := v.FillPath(p, v.Context().CompileString("_"))
		if pv := f.LookupPath(p); pv.Exists() && pv.Err() == nil {
			return pv, true
		}
	}
	return cue.Value{}, false
}

func (c *converter) array(s map[string]any, v cue.Value) {
	s["type"] = "array"
	if ev := v.LookupPath(cue.MakePath(cue.AnyIndex)); ev.Exists() {
		s["items"] = c.convert(ev, false)
	}
}

// definitionRef reports the definition a value refers to, if it is a plain
// reference to one of the schema's top-level definitions.
func definitionRef(v cue.Value) (string, bool) {
	_, p := v.ReferencePath()
	sel := p.Selectors()
	if len(sel) != 1 || !sel[0].IsDefinition() {
		return "", false
	}
	return sel[0].String(), true
}

func addDefault(s map[string]any, v cue.Value) {
	d, ok := v.Default()
	if !ok || !d.IsConcrete() {
		return
	}
	var x any
	if err := d.Decode(&x); err == nil {
		s["default"] = x
	}
}

func addDescription(s map[string]any, v cue.Value) {
	var parts []string
	for _, d := range v.Doc() {
		if t := strings.TrimSpace(d.Text()); t != "" {
			parts = append(parts, strings.ReplaceAll(t, "\n", " "))
		}
	}
	if len(parts) > 0 {
		s["description"] = strings.Join(parts, " ")
	}
}

// mergeAll folds conjunct schemas into one object when their keys do not
// clash (the usual "string & pattern & maxLength" case).
func mergeAll(parts []any) (map[string]any, bool) {
	out := map[string]any{}
	for _, p := range parts {
		m, ok := p.(map[string]any)
		if !ok {
			return nil, false
		}
		for k, val := range m {
			if old, dup := out[k]; dup && fmt.Sprint(old) != fmt.Sprint(val) {
				return nil, false
			}
			out[k] = val
		}
	}
	return out, true
}
