package deploy

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestWalkthroughTagsQuoted: every kustomize newTag the docs tell a user to
// write is quoted. A TAG of the user's own may be a short commit hash, and
// one of digits only (4854011) is a YAML number, which kustomize refuses
// ("cannot unmarshal number into Go struct field Image.images.newTag").
func TestWalkthroughTagsQuoted(t *testing.T) {
	tagLine := regexp.MustCompile(`^\s*newTag:\s*(\S.*)$`)
	for _, doc := range []string{"docs/getting-started.md", "docs/how-to/install.md", "docs/how-to/gitops.md", "deploy/paperclip/README.md", "deploy/argocd/README.md"} {
		data, err := os.ReadFile(filepath.Join(deployDir, "..", doc))
		if err != nil {
			t.Fatal(err)
		}
		found := 0
		for i, line := range strings.Split(string(data), "\n") {
			m := tagLine.FindStringSubmatch(line)
			if m == nil {
				continue
			}
			found++
			if v := m[1]; !strings.HasPrefix(v, `"`) && !strings.HasPrefix(v, `'`) {
				t.Errorf("%s:%d: newTag %s is not quoted: a tag of digits only would be a number", doc, i+1, v)
			}
		}
		if found == 0 {
			t.Errorf("%s has no newTag line: take it off this list", doc)
		}
	}
}
