package main

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// repoRoot is the repository, seen from this package.
const repoRoot = "../.."

// goPackages returns every folder of the repository (relative, with
// slashes) that holds a Go file other than a test (the suites under test/
// each have a doc.go), leaving out hidden or data folders.
func goPackages(t *testing.T) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(repoRoot, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(repoRoot, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			base := d.Name()
			if rel != "." && (strings.HasPrefix(base, ".") || strings.HasPrefix(base, "_") || base == "testdata" ||
				base == "node_modules" || rel == "bin") {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(rel, ".go") && !strings.HasSuffix(rel, "_test.go") {
			out = append(out, filepath.ToSlash(filepath.Dir(rel)))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// designTable returns the paths named in docs/design.md's package table
// (its "| path | job |" rows), each as written in backquotes.
func designTable(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, "docs", "design.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(data), "| path | job |")
	if !ok {
		t.Fatal(`docs/design.md has no "| path | job |" table`)
	}
	var paths []string
	tick := regexp.MustCompile("`([^`]+)`")
	for _, line := range strings.Split(table, "\n")[2:] {
		if !strings.HasPrefix(line, "|") {
			break
		}
		cells := strings.Split(line, "|")
		for _, m := range tick.FindAllStringSubmatch(cells[1], -1) {
			paths = append(paths, m[1])
		}
	}
	return paths
}

// TestDesignTableNamesEveryPackage fails when a Go package folder, or a
// TypeScript integration under integrations/, is missing from
// docs/design.md's package table, which calls itself the contract. A
// row naming a folder with a trailing slash (`hack/`) covers what is under
// it.
func TestDesignTableNamesEveryPackage(t *testing.T) {
	named := designTable(t)
	folders := goPackages(t)
	// The TypeScript integrations are packages too (a package.json each).
	plugins, err := filepath.Glob(filepath.Join(repoRoot, "integrations", "*", "package.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range plugins {
		rel, _ := filepath.Rel(repoRoot, filepath.Dir(p))
		folders = append(folders, filepath.ToSlash(rel))
	}
	var missing []string
	for _, pkg := range folders {
		found := false
		for _, n := range named {
			if n == pkg || n == pkg+"/" || (strings.HasSuffix(n, "/") && strings.HasPrefix(pkg+"/", n)) {
				found = true
				break
			}
		}
		if !found {
			missing = append(missing, pkg)
		}
	}
	if diff := cmp.Diff([]string(nil), missing); diff != "" {
		t.Errorf("packages missing from docs/design.md's package table (-want +got):\n%s", diff)
	}
}

// goFileName matches a Go file name (or a pattern such as proc_*.go) in a
// doc comment.
var goFileName = regexp.MustCompile(`[A-Za-z0-9_*]+\.go\b`)

// TestDocMapsAreComplete fails when a package's doc.go maps its files (it
// names any .go file) but leaves one out, and when a package's parent has a
// doc.go that does not name it.
func TestDocMapsAreComplete(t *testing.T) {
	pkgs := goPackages(t)
	has := map[string]bool{}
	for _, p := range pkgs {
		has[p] = true
	}
	var problems []string
	for _, pkg := range pkgs {
		dir := filepath.Join(repoRoot, pkg)
		doc, err := os.ReadFile(filepath.Join(dir, "doc.go"))
		if err == nil {
			named := goFileName.FindAllString(string(doc), -1)
			if len(named) > 0 {
				entries, err := os.ReadDir(dir)
				if err != nil {
					t.Fatal(err)
				}
				for _, e := range entries {
					n := e.Name()
					if e.IsDir() || !strings.HasSuffix(n, ".go") || strings.HasSuffix(n, "_test.go") || n == "doc.go" {
						continue
					}
					listed := false
					for _, pat := range named {
						if ok, _ := filepath.Match(pat, n); ok {
							listed = true
							break
						}
					}
					if !listed {
						problems = append(problems, pkg+"/doc.go does not map "+n)
					}
				}
			}
		}
		parent := filepath.ToSlash(filepath.Dir(pkg))
		if !has[parent] {
			continue
		}
		pdoc, err := os.ReadFile(filepath.Join(repoRoot, parent, "doc.go"))
		if err != nil {
			continue
		}
		if !strings.Contains(string(pdoc), filepath.Base(pkg)) {
			problems = append(problems, parent+"/doc.go does not name its package "+filepath.Base(pkg))
		}
	}
	if diff := cmp.Diff([]string(nil), problems); diff != "" {
		t.Errorf("package maps that drifted (-want +got):\n%s", diff)
	}
}
