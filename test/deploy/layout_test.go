package deploy

import (
	"io/fs"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestDeployHoldsManifestsOnly: deploy/ holds manifests (YAML, and the
// dashboard's JSON) and READMEs, nothing else, so that a copy of it or a
// remote base (…//deploy/base?ref=v0.1.0) brings no Go file, test or
// build file into a user's GitOps repository; their tests live here.
func TestDeployHoldsManifestsOnly(t *testing.T) {
	var others []string
	manifests := 0
	err := filepath.WalkDir(deployDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		switch filepath.Ext(path) {
		case ".yaml", ".yml", ".json":
			manifests++
			return nil
		}
		if d.Name() != "README.md" {
			rel, _ := filepath.Rel(deployDir, path)
			others = append(others, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(others)
	if diff := cmp.Diff([]string(nil), others); diff != "" {
		t.Errorf("files under deploy/ that are neither manifests nor READMEs (-want +got):\n%s", diff)
	}
	if manifests == 0 {
		t.Errorf("no manifest under %s", deployDir)
	}
}
