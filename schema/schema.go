// Package schema embeds pcsync's CUE schema: the single source of truth for
// the config documents (Settings, Company), the run request (Run), and their
// defaults, including the built-in adapter defaults.
package schema

import (
	"embed"
	"fmt"
	"io/fs"
	"sort"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/build"
	"cuelang.org/go/cue/parser"
)

// adapter_types.cue is derived from pkg/adapters, the one list of adapter names.
//
//go:generate go run ../hack/genadapters -o adapter_types.cue

// files holds the *.cue files of the schema, all in CUE package "schema".
//
//go:embed *.cue
var files embed.FS

// Kinds lists the document kinds the schema defines, each validated
// against the definition of the same name (Settings → #Settings).
func Kinds() []string { return []string{"Company", "Run", "Settings"} }

// Definition returns the CUE path of the definition for a document kind.
func Definition(kind string) (cue.Path, bool) {
	for _, k := range Kinds() {
		if k == kind {
			return cue.ParsePath("#" + kind), true
		}
	}
	return cue.Path{}, false
}

// AdapterDefaults returns the path of the built-in adapter defaults table.
func AdapterDefaults() cue.Path { return cue.ParsePath("adapterDefaults") }

// Sources returns the schema files by name, for documentation and export.
func Sources() (map[string][]byte, error) {
	names, err := fs.Glob(files, "*.cue")
	if err != nil {
		return nil, fmt.Errorf("schema: list files: %w", err)
	}
	out := make(map[string][]byte, len(names))
	for _, n := range names {
		b, err := files.ReadFile(n)
		if err != nil {
			return nil, fmt.Errorf("schema: read %s: %w", n, err)
		}
		out[n] = b
	}
	return out, nil
}

// Compile builds the schema in ctx. A cue.Context is not safe for concurrent
// use: the caller owns ctx and must not share it across goroutines.
func Compile(ctx *cue.Context) (cue.Value, error) {
	srcs, err := Sources()
	if err != nil {
		return cue.Value{}, err
	}
	names := make([]string, 0, len(srcs))
	for n := range srcs {
		names = append(names, n)
	}
	sort.Strings(names)
	inst := build.NewContext().NewInstance("schema", nil)
	for _, n := range names {
		f, err := parser.ParseFile("schema/"+n, srcs[n], parser.ParseComments)
		if err != nil {
			return cue.Value{}, fmt.Errorf("schema: parse %s: %w", n, err)
		}
		if err := inst.AddSyntax(f); err != nil {
			return cue.Value{}, fmt.Errorf("schema: add %s: %w", n, err)
		}
	}
	v := ctx.BuildInstance(inst)
	if err := v.Err(); err != nil {
		return cue.Value{}, fmt.Errorf("schema: build: %w", err)
	}
	return v, nil
}
