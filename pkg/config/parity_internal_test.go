package config

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/cuecontext"

	"github.com/pcsync/pcsync/schema"
)

// The Go model (model.go) restates the schema's shapes by hand, and
// json.Unmarshal drops a field it has no place for without a word. These
// tests fail instead: the first when a field of the schema has no Go
// field, the second when a config of the repository decodes to more than
// the model holds.

// modelOf maps each kind of document to the Go type its JSON decodes into.
var modelOf = map[string]reflect.Type{
	"Settings": reflect.TypeFor[Settings](),
	"Company":  reflect.TypeFor[Company](),
	"Run":      reflect.TypeFor[RunRequest](),
}

func TestModelHasEveryField(t *testing.T) {
	root, err := schema.Compile(cuecontext.New())
	if err != nil {
		t.Fatal(err)
	}
	// The walk itself: a Company type that lost most of its fields must
	// be caught, down to the nested ones.
	type lostSpec struct {
		Namespace string `json:"namespace"`
	}
	type lostCompany struct {
		APIVersion string   `json:"apiVersion"`
		Spec       lostSpec `json:"spec"`
	}
	p, _ := schema.Definition("Company")
	var lost []string
	walkModel(root.LookupPath(p), reflect.TypeFor[lostCompany](), "Company", map[reflect.Type]int{}, &lost)
	for _, want := range []string{"Company.kind (config.lostCompany)", "Company.metadata (config.lostCompany)", "Company.spec.agents (config.lostSpec)"} {
		if !slices.Contains(lost, want) {
			t.Errorf("the walk missed %q; it found %q", want, lost)
		}
	}
	for _, k := range schema.Kinds() {
		typ, ok := modelOf[k]
		if !ok {
			t.Errorf("kind %s has no Go type in modelOf", k)
			continue
		}
		p, _ := schema.Definition(k)
		var missing []string
		walkModel(root.LookupPath(p), typ, k, map[reflect.Type]int{}, &missing)
		for _, m := range missing {
			t.Errorf("%s: the schema has the field, model.go has no Go field for it (json.Unmarshal would drop it)", m)
		}
	}
}

// walkModel compares the fields of schema value v with those of Go type
// typ, recursively, and records each schema field with no Go field.
func walkModel(v cue.Value, typ reflect.Type, path string, seen map[reflect.Type]int, missing *[]string) {
	for typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	// A type that decodes itself (a quantity, a CIDR rule, a secret) takes
	// what the schema allows its own way.
	if reflect.PointerTo(typ).Implements(reflect.TypeFor[json.Unmarshaler]()) {
		return
	}
	if seen[typ] > 2 { // recursive shapes (none today) end here
		return
	}
	seen[typ]++
	defer func() { seen[typ]-- }()
	for _, c := range disjuncts(v) {
		switch typ.Kind() {
		case reflect.Struct:
			if c.IncompleteKind()&cue.StructKind == 0 {
				continue
			}
			it, err := c.Fields(cue.Optional(true))
			if err != nil {
				continue
			}
			for it.Next() {
				name := it.Selector().Unquoted()
				f, ok := jsonField(typ, name)
				if !ok {
					*missing = append(*missing, path+"."+name+" ("+typ.String()+")")
					continue
				}
				walkModel(it.Value(), f.Type, path+"."+name, seen, missing)
			}
		case reflect.Slice:
			if c.IncompleteKind()&cue.ListKind == 0 || typ.Elem().Kind() == reflect.Uint8 {
				continue
			}
			if e := c.LookupPath(cue.MakePath(cue.AnyIndex)); e.Exists() {
				walkModel(e, typ.Elem(), path+"[]", seen, missing)
			}
		case reflect.Map:
			if e := c.LookupPath(cue.MakePath(cue.AnyString)); e.Exists() {
				walkModel(e, typ.Elem(), path+".*", seen, missing)
			}
		}
	}
}

// jsonField finds the field of struct typ that encoding/json decodes the
// key name into (embedded structs included).
func jsonField(typ reflect.Type, name string) (reflect.StructField, bool) {
	for _, f := range reflect.VisibleFields(typ) {
		if !f.IsExported() || f.Anonymous && f.Tag.Get("json") == "" {
			continue
		}
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case tag == "-":
			continue
		case tag == "" && strings.EqualFold(f.Name, name), tag == name:
			return f, true
		}
	}
	return reflect.StructField{}, false
}

func TestRepositoryConfigsDecodeStrictly(t *testing.T) {
	dirs, _ := filepath.Glob(filepath.Join("..", "..", "testdata", "render", "*", "config"))
	dirs = append(dirs, filepath.Join("..", "..", "examples", "config"))
	if len(dirs) < 5 {
		t.Fatalf("found %d config directories, want the render corpus and examples/config", len(dirs))
	}
	opts := DefaultLoadOptions()
	if err := opts.complete(); err != nil {
		t.Fatal(err)
	}
	docs := 0
	for _, dir := range dirs {
		if _, err := Load(t.Context(), dir, opts); err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		files, err := listFiles(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, file := range files {
			r, err := loadFile(file, opts)
			if err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			// r.errs: a kustomize patch file is not a config document;
			// Load above took the directory as valid.
			for _, d := range r.docs {
				typ, ok := modelOf[d.kind]
				if !ok {
					continue // kustomize patches and other kinds
				}
				docs++
				strictDecode(t, file, d.json, typ)
			}
		}
	}
	runs, _ := filepath.Glob(filepath.Join("..", "..", "examples", "spool", "*"))
	for _, file := range runs {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		v, err := sharedValidator()
		if err != nil {
			t.Fatal(err)
		}
		ld, err := v.checkRun(file, data)
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		docs++
		strictDecode(t, file, ld.json, modelOf["Run"])
	}
	t.Logf("%d documents of %d config directories and examples/spool decode with unknown fields disallowed", docs, len(dirs))
}

// strictDecode decodes data into a new typ with unknown fields disallowed.
func strictDecode(t *testing.T, file string, data []byte, typ reflect.Type) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(reflect.New(typ).Interface()); err != nil {
		t.Errorf("%s: the schema's JSON has a field the Go model drops: %v", file, err)
	}
}
