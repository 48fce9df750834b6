package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pcsync/pcsync/pkg/jsonschema"
)

func TestSchemaCommand(t *testing.T) {
	want, err := jsonschema.Export(jsonschema.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := pcsync(t, "schema")
	if code != 0 {
		t.Fatalf("schema: exit %d\n%s", code, stderr)
	}
	if diff := cmp.Diff(string(want)+"\n", stdout); diff != "" {
		t.Errorf("schema output differs from jsonschema.Export (-want +got):\n%s", diff)
	}

	out := filepath.Join(t.TempDir(), ".vscode", "pcsync.schema.json")
	if code, _, stderr := pcsync(t, "schema", "--kind", "run", "--compact", "--output-file", out); code != 0 {
		t.Fatalf("schema --output-file: exit %d\n%s", code, stderr)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		OneOf []struct {
			Ref string `json:"$ref"`
		} `json:"oneOf"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("schema --output-file wrote invalid JSON: %v", err)
	}
	if len(doc.OneOf) != 1 || !strings.HasSuffix(doc.OneOf[0].Ref, "Run") {
		t.Errorf("--kind run: top level %+v, want one $ref to the Run definition", doc.OneOf)
	}
}

// TestSchemaFlags: -o is an output format (json, the only one), the file
// is --output-file; schema -o FILE, its old spelling, is refused naming it.
func TestSchemaFlags(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantStdout bool
		wantStderr string
	}{
		{"-o json", []string{"-o", "json"}, 0, true, ""},
		{"--output-file -", []string{"--output-file", "-"}, 0, true, ""},
		{"-o FILE", []string{"-o", "x.json"}, 2, false,
			`--output "x.json": want json (-o is an output format, as in kubectl); to write to x.json: --output-file x.json`},
		{"unknown kind", []string{"--kind", "nope"}, 2, false, `--kind "nope"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := pcsync(t, append([]string{"schema"}, tt.args...)...)
			if code != tt.wantCode || (stdout != "") != tt.wantStdout || !strings.Contains(stderr, tt.wantStderr) {
				t.Errorf("exit %d, want %d; stdout %d bytes, want some: %v; stderr, want %q:\n%s",
					code, tt.wantCode, len(stdout), tt.wantStdout, tt.wantStderr, stderr)
			}
		})
	}
}
