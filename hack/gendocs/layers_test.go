package main

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const modulePath = "github.com/pcsync/pcsync/"

// layer is where a folder of the repository sits in docs/design.md's
// layers: 1 internal/lib and schema (the embedded CUE), 2 pkg, 3 the rest of internal, 4 cmd; 0 for the
// test harnesses (internal/testing), the suites and hack/, which only tests
// and tools import.
func layer(dir string) int {
	switch {
	case strings.HasPrefix(dir, "internal/testing/"), strings.HasPrefix(dir, "test/"),
		strings.HasPrefix(dir, "hack/"):
		return 0
	case strings.HasPrefix(dir, "internal/lib/"), dir == "schema":
		return 1
	case strings.HasPrefix(dir, "pkg/"):
		return 2
	case strings.HasPrefix(dir, "internal/"):
		return 3
	case strings.HasPrefix(dir, "cmd/"):
		return 4
	}
	return 0
}

// TestImportsRunDown fails on an import of a production file (not a test)
// that runs up a layer, or that reaches the test harnesses from outside
// the harnesses, the suites and hack/.
func TestImportsRunDown(t *testing.T) {
	var bad []string
	for _, dir := range goPackages(t) {
		from := layer(dir)
		for imp := range productionImports(t, dir) {
			to := strings.TrimPrefix(imp, modulePath)
			switch {
			case strings.HasPrefix(to, "internal/testing/") && from != 0:
				bad = append(bad, dir+" imports the test harness "+to)
			case from != 0 && layer(to) > from:
				bad = append(bad, dir+" (layer "+strconv.Itoa(from)+") imports "+to+" (layer "+strconv.Itoa(layer(to))+")")
			}
		}
	}
	if diff := cmp.Diff([]string(nil), bad); diff != "" {
		t.Errorf("imports that run up a layer (docs/design.md, Packages) (-want +got):\n%s", diff)
	}
}

// productionImports returns the module's packages that dir's non-test Go
// files import.
func productionImports(t *testing.T, dir string) map[string]bool {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(repoRoot, dir))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	fset := token.NewFileSet()
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(repoRoot, dir, e.Name()), nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, is := range f.Imports {
			if p, _ := strconv.Unquote(is.Path.Value); strings.HasPrefix(p, modulePath) {
				out[p] = true
			}
		}
	}
	return out
}

// TestLayerOfEveryPackage keeps layer's cases true: each Go package folder
// is in one of the folders it knows.
func TestLayerOfEveryPackage(t *testing.T) {
	known := []string{"cmd/", "pkg/", "internal/", "hack/", "test/", "schema"}
	var unknown []string
	for _, dir := range goPackages(t) {
		if !slices.ContainsFunc(known, func(k string) bool { return strings.HasPrefix(dir, k) }) {
			unknown = append(unknown, dir)
		}
	}
	if len(unknown) > 0 {
		t.Errorf("packages in no layer: %v", unknown)
	}
}
