package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// maxFuncLines is the longest a non-test function of pkg/, cmd/ and
// internal/ may be, from its func line to its closing brace (issue 41: the
// anchors' longest are 53–72; split steps into functions, repeated returns
// into tables).
const maxFuncLines = 80

// TestNoLongFunctions fails when a non-test function under pkg/, cmd/ or
// internal/ is longer than maxFuncLines, naming each.
func TestNoLongFunctions(t *testing.T) {
	var long []string
	fset := token.NewFileSet()
	for _, top := range []string{"pkg", "cmd", "internal"} {
		err := filepath.WalkDir(filepath.Join(repoRoot, top), func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
				return err
			}
			f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			for _, decl := range f.Decls {
				fn, ok := decl.(*ast.FuncDecl)
				if !ok || fn.Body == nil {
					continue
				}
				if n := fset.Position(fn.End()).Line - fset.Position(fn.Pos()).Line + 1; n > maxFuncLines {
					rel, _ := filepath.Rel(repoRoot, p)
					long = append(long, filepath.ToSlash(rel)+": "+fn.Name.Name)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if diff := cmp.Diff([]string(nil), long); diff != "" {
		t.Errorf("functions over %d lines (-want +got):\n%s", maxFuncLines, diff)
	}
}
