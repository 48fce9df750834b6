package config_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/pcsync/pcsync/pkg/config"
)

// cachedCompany is companyDoc(slug) with the id given.
func cachedCompany(slug, id string) string {
	return strings.Replace(companyDoc(slug), "id: id-"+slug, "id: "+id, 1)
}

// TestLoadCache: a Load with a cache gives what a Load without one
// gives, parses again only the files that changed or moved and validates
// again only the documents that changed, never keeps an
// invalid document, runs the rules across documents on the whole model
// (a duplicate id in an unchanged file is found), and names each file by
// its path now (a checkout moved, as git-sync moves it).
func TestLoadCache(t *testing.T) {
	base := map[string]string{
		"settings.yaml":      "apiVersion: pcsync.io/v1alpha1\nkind: Settings\nmetadata: {name: settings}\nspec: {}\n",
		"companies/a.yaml":   cachedCompany("a", "id-a"),
		"companies/b.yaml":   cachedCompany("b", "id-b") + "---\n" + cachedCompany("c", "id-c"),
		"companies/bad.yaml": "apiVersion: pcsync.io/v1alpha1\nkind: Company\nmetadata: {name: bad}\nspec: {}\n",
	}
	tests := []struct {
		name string
		// edit changes the files of base (an empty value removes one).
		edit map[string]string
		// moved loads from another directory.
		moved bool
		// validated is how many documents the second Load validates, parsed
		// how many files it parses, cached how many documents the cache
		// holds after it.
		validated, parsed, cached int
	}{
		{"nothing changed", nil, false, 1, 1, 4},
		{"one file changed", map[string]string{"companies/a.yaml": cachedCompany("a", "id-a2")}, false, 2, 2, 4},
		{"a duplicate id in a changed file", map[string]string{"companies/a.yaml": cachedCompany("a", "id-b")}, false, 2, 2, 4},
		{"the bad file fixed", map[string]string{"companies/bad.yaml": cachedCompany("bad", "id-bad")}, false, 1, 1, 5},
		{"a file removed", map[string]string{"companies/a.yaml": ""}, false, 1, 1, 3},
		{"the checkout moved", nil, true, 1, 4, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "rev1")
			writeFiles(t, dir, base)
			v, err := config.NewValidator(0)
			if err != nil {
				t.Fatal(err)
			}
			cache := config.NewLoadCache()
			opts := config.DefaultLoadOptions()
			opts.Validator, opts.Cache = v, cache
			_, _ = config.Load(context.Background(), dir, opts)
			if tt.moved {
				next := filepath.Join(filepath.Dir(dir), "rev2")
				if err := os.Rename(dir, next); err != nil {
					t.Fatal(err)
				}
				dir = next
			}
			for name, content := range tt.edit {
				if content == "" {
					if err := os.Remove(filepath.Join(dir, name)); err != nil {
						t.Fatal(err)
					}
					continue
				}
				writeFiles(t, dir, map[string]string{name: content})
			}
			validated0, parsed0, _ := config.CacheCounts(cache)
			got, gotErr := config.Load(context.Background(), dir, opts)
			validated, parsed, held := config.CacheCounts(cache)
			if n := validated - validated0; n != tt.validated {
				t.Errorf("validated %d documents, want %d", n, tt.validated)
			}
			if n := parsed - parsed0; n != tt.parsed {
				t.Errorf("parsed %d files, want %d", n, tt.parsed)
			}
			if held != tt.cached {
				t.Errorf("the cache holds %d documents, want %d", held, tt.cached)
			}
			opts.Cache = nil
			want, wantErr := config.Load(context.Background(), dir, opts)
			if diff := cmp.Diff(errorText(wantErr), errorText(gotErr)); diff != "" {
				t.Errorf("errors with the cache (-without +with):\n%s", diff)
			}
			if diff := cmp.Diff(want, got, cmpopts.IgnoreUnexported(config.Model{}), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("model with the cache (-without +with):\n%s", diff)
			}
			if gotErr != nil && !strings.Contains(gotErr.Error(), dir) {
				t.Errorf("errors do not name the files where they are now (%s):\n%v", dir, gotErr)
			}
		})
	}
}

func errorText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
