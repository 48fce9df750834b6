package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestValidateInputs: validate takes a directory, files or - (standard
// input), as a pre-commit hook passes them; files are a config directory of
// just them, errors name the file (<stdin> for standard input) and line, and
// no document at all validates with a warning.
func TestValidateInputs(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	company := func(slug string) string {
		return "apiVersion: pcsync.io/v1alpha1\nkind: Company\nmetadata: {name: " + slug + "}\nspec: {id: " + slug + "-id}\n"
	}
	for name, content := range map[string]string{
		"config/acme.yaml":     company("acme"),
		"config/again.yaml":    company("acme"),
		"config/settings.yaml": "apiVersion: pcsync.io/v1alpha1\nkind: Settings\nmetadata: {name: s}\nspec: {namespacePrefix: t-}\n",
		"comments.yaml":        "# nothing yet\n",
	} {
		if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(name, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir("empty", 0o755); err != nil {
		t.Fatal(err)
	}
	noSettings := ": warning: no Settings document among the files: checked with Settings' defaults\n"
	tests := []struct {
		name                   string
		args                   []string
		stdin                  string
		wantCode               int
		wantStdout, wantStderr string
	}{
		{"a directory", []string{"config"}, "", 1, "", "config/again.yaml:3:18: metadata.name: company \"acme\" is defined twice"},
		{"one file", []string{"config/acme.yaml"}, "", 0, "config/acme.yaml: valid: 1 companies, 13 objects\n",
			"config/acme.yaml" + noSettings},
		{"files with their Settings", []string{"config/acme.yaml", "config/settings.yaml"}, "", 0,
			"2 files: valid: 1 companies, 13 objects\n", ""},
		{"a rule across the files", []string{"config/acme.yaml", "config/again.yaml"}, "", 1, "",
			"config/again.yaml:3:18: metadata.name: company \"acme\" is defined twice (first at config/acme.yaml:3:18)"},
		{"standard input", []string{"-"}, company("stdin"), 0, "<stdin>: valid: 1 companies, 13 objects\n", "<stdin>" + noSettings},
		{"standard input, invalid", []string{"-"}, company("Bad"), 1, "", "<stdin>:3:18: metadata.name: invalid value \"Bad\""},
		{"standard input with a file", []string{"config/settings.yaml", "-"}, company("stdin"), 0,
			"2 files: valid: 1 companies, 13 objects\n", ""},
		{"an empty directory", []string{"empty"}, "", 0, "empty: valid: 0 companies, 0 objects\n",
			"empty: warning: no Settings or Company document\n"},
		{"no document", []string{"comments.yaml"}, "", 0, "comments.yaml: valid: 0 companies, 0 objects\n",
			"comments.yaml: warning: no Settings or Company document\n"},
		{"empty standard input", []string{"-"}, "", 0, "<stdin>: valid: 0 companies, 0 objects\n",
			"<stdin>: warning: no Settings or Company document\n"},
		{"a missing file", []string{"missing.yaml"}, "", 2, "", "pcsync: config file: open missing.yaml: no such file or directory\n"},
		{"a directory among files", []string{"config/acme.yaml", "empty"}, "", 2, "",
			"pcsync: empty is a directory: give one directory, or files\n"},
		{"standard input twice", []string{"-", "-"}, "", 2, "", "pcsync: - (standard input) is given twice\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := runWithStdin(context.Background(), append([]string{"validate"}, tt.args...), strings.NewReader(tt.stdin), &stdout, &stderr)
			if code != tt.wantCode || !strings.Contains(stderr.String(), tt.wantStderr) {
				t.Errorf("exit %d, want %d and stderr with %q; stderr:\n%s", code, tt.wantCode, tt.wantStderr, stderr.String())
			}
			if tt.wantStderr == "" && stderr.Len() > 0 {
				t.Errorf("stderr, want none:\n%s", stderr.String())
			}
			if diff := cmp.Diff(tt.wantStdout, stdout.String()); diff != "" {
				t.Errorf("stdout (-want +got):\n%s", diff)
			}
		})
	}
}
