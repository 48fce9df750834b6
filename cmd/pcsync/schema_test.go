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
	if code, _, stderr := pcsync(t, "schema", "--kind", "run", "--compact", "-o", out); code != 0 {
		t.Fatalf("schema -o: exit %d\n%s", code, stderr)
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
		t.Fatalf("schema -o wrote invalid JSON: %v", err)
	}
	if len(doc.OneOf) != 1 || !strings.HasSuffix(doc.OneOf[0].Ref, "Run") {
		t.Errorf("--kind run: top level %+v, want one $ref to the Run definition", doc.OneOf)
	}

	if code, _, stderr := pcsync(t, "schema", "--kind", "nope"); code != 2 || !strings.Contains(stderr, `--kind "nope"`) {
		t.Errorf("schema --kind nope: exit %d\n%s", code, stderr)
	}
}
