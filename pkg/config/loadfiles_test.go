package config_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pcsync/pcsync/pkg/config"
)

// TestLoadFiles: files given by themselves load as a config directory of
// just them (rules across documents among them, Settings' defaults when
// none is given), standard input by its name, patch files inside the root
// whether the files are named relative or absolute.
func TestLoadFiles(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	patched := companyDoc("patched") + "  patches:\n    - path: ../patches/p.yaml\n      target: {kind: ResourceQuota}\n"
	writeFiles(t, dir, map[string]string{
		"config/acme.yaml":      companyDoc("acme"),
		"config/again.yaml":     companyDoc("acme"),
		"config/settings.yaml":  "apiVersion: pcsync.io/v1alpha1\nkind: Settings\nmetadata: {name: s}\nspec:\n  namespacePrefix: t-\n",
		"config/t/patched.yaml": patched,
		"config/patches/p.yaml": "- op: remove\n  path: /spec/hard/pods\n",
		"outside.yaml":          companyDoc("outside") + "  patches:\n    - path: ../p.yaml\n      target: {kind: ResourceQuota}\n",
		"comments.yaml":         "# nothing yet\n",
	})
	file := func(names ...string) []config.File {
		var fs []config.File
		for _, n := range names {
			fs = append(fs, config.File{Name: n})
		}
		return fs
	}
	tests := []struct {
		name         string
		root         string
		files        []config.File
		wantSlugs    []string
		wantSettings bool
		wantErr      string
	}{
		{"one company, Settings' defaults", ".", file("config/acme.yaml"), []string{"acme"}, false, ""},
		{"with its Settings", ".", file("config/acme.yaml", "config/settings.yaml"), []string{"acme"}, true, ""},
		{"a rule across the files", ".", file("config/acme.yaml", "config/again.yaml"), nil, false,
			`config/again.yaml:4:9: metadata.name: company "acme" is defined twice (first at config/acme.yaml:4:9)`},
		{"standard input", ".", []config.File{{Name: "<stdin>", Data: []byte(companyDoc("Bad"))}}, nil, false,
			"<stdin>:4:9: metadata.name:"},
		{"a patch inside the root", ".", file("config/t/patched.yaml"), []string{"patched"}, false, ""},
		{"a patch inside the root, named absolute", ".", file(filepath.Join(dir, "config/t/patched.yaml")), []string{"patched"}, false, ""},
		{"a patch outside the root", "config", file("outside.yaml"), nil, false, "is outside the config directory"},
		{"no document", ".", file("comments.yaml"), nil, false, ""},
		{"no file at all", ".", nil, nil, false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := config.LoadFiles(context.Background(), tt.root, tt.files, config.LoadOptions{})
			if tt.wantErr != "" {
				var ce *config.Errors
				if !errors.As(err, &ce) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want config errors with %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var slugs []string
			for _, c := range m.Companies {
				slugs = append(slugs, c.Slug())
			}
			if diff := cmp.Diff(tt.wantSlugs, slugs); diff != "" {
				t.Errorf("companies (-want +got):\n%s", diff)
			}
			if m.HasSettings() != tt.wantSettings || m.Empty() != (len(tt.wantSlugs) == 0 && !tt.wantSettings) {
				t.Errorf("HasSettings %v, want %v; Empty %v", m.HasSettings(), tt.wantSettings, m.Empty())
			}
		})
	}
	if _, err := config.LoadFiles(context.Background(), ".", file("missing.yaml"), config.LoadOptions{}); err == nil || errors.As(err, new(*config.Errors)) {
		t.Errorf("a missing file: err = %v, want a plain error", err)
	}
}
