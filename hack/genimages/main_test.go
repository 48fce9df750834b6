package main

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pcsync/pcsync/pkg/images"
)

// repoRoot is the repository, seen from this package.
const repoRoot = "../.."

// TestCurrent fails when a Dockerfile under images/ is not what genimages
// writes from pkg/images, or when images/ holds a Dockerfile the catalog
// does not give: run `go run ./hack/genimages`.
func TestCurrent(t *testing.T) {
	want, err := images.Dockerfiles()
	if err != nil {
		t.Fatal(err)
	}
	for rel, data := range want {
		got, err := os.ReadFile(filepath.Join(repoRoot, filepath.FromSlash(rel)))
		if err != nil {
			t.Errorf("%s: %v; run `go run ./hack/genimages`", rel, err)
			continue
		}
		if diff := cmp.Diff(string(data), string(got)); diff != "" {
			t.Errorf("%s is stale; run `go run ./hack/genimages` (-generated +committed):\n%s", rel, diff)
		}
	}
	found, err := filepath.Glob(filepath.Join(repoRoot, "images", "*", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	var extra []string
	for _, p := range found {
		rel, _ := filepath.Rel(repoRoot, p)
		if _, ok := want[filepath.ToSlash(rel)]; !ok {
			extra = append(extra, filepath.ToSlash(rel))
		}
	}
	slices.Sort(extra)
	if diff := cmp.Diff([]string(nil), extra); diff != "" {
		t.Errorf("Dockerfiles the catalog does not give (-want +got):\n%s", diff)
	}
}
