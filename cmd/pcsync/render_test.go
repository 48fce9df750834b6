package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestRenderOutput: -o is a format (yaml, the default, or json) on stdout,
// --output-dir writes the per-company tree, and render -o DIR, its old
// spelling, is refused naming --output-dir, before anything is written.
func TestRenderOutput(t *testing.T) {
	good := filepath.Join("..", "..", "testdata", "render", "minimal", "config")
	code, yamlOut, stderr := pcsync(t, "render", good)
	if code != 0 || !strings.HasPrefix(yamlOut, "apiVersion: v1\nkind: Namespace\n") {
		t.Fatalf("render: exit %d; stdout:\n%s\nstderr:\n%s", code, yamlOut, stderr)
	}
	docs := strings.Count("\n"+yamlOut, "\n---\n") + 1
	tmp := t.TempDir()
	tests := []struct {
		name       string
		args       []string
		wantCode   int
		check      func(t *testing.T, stdout string)
		wantStderr string
		wantFiles  []string
	}{
		{"-o yaml", []string{"-o", "yaml"}, 0, func(t *testing.T, stdout string) {
			if diff := cmp.Diff(yamlOut, stdout); diff != "" {
				t.Errorf("-o yaml differs from the default (-default +yaml):\n%s", diff)
			}
		}, "", nil},
		{"-o json", []string{"-o", "json"}, 0, func(t *testing.T, stdout string) {
			var list struct {
				Kind  string           `json:"kind"`
				Items []map[string]any `json:"items"`
			}
			if err := json.Unmarshal([]byte(stdout), &list); err != nil || list.Kind != "List" || len(list.Items) != docs {
				t.Errorf("want a List of %d items (err %v), got kind %q with %d:\n%s", docs, err, list.Kind, len(list.Items), stdout)
			}
		}, "", nil},
		{"--output-dir", []string{"--output-dir", filepath.Join(tmp, "tree")}, 0, nil, "",
			[]string{"acme.yaml", "kustomization.yaml"}},
		{"-o DIR", []string{"-o", filepath.Join(tmp, "old")}, 2, nil,
			"(-o is an output format, as in kubectl); to write to " + filepath.Join(tmp, "old") + ": --output-dir " + filepath.Join(tmp, "old"), nil},
		{"-o json --output-dir", []string{"-o", "json", "--output-dir", filepath.Join(tmp, "both")}, 2, nil,
			"--output-dir writes YAML files: leave out --output json", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := pcsync(t, append([]string{"render", good}, tt.args...)...)
			if code != tt.wantCode || !strings.Contains(stderr, tt.wantStderr) {
				t.Fatalf("exit %d, want %d and stderr with %q; stderr:\n%s", code, tt.wantCode, tt.wantStderr, stderr)
			}
			if tt.check != nil {
				tt.check(t, stdout)
			} else if stdout != "" {
				t.Errorf("stdout, want none:\n%s", stdout)
			}
			if tt.wantFiles != nil {
				var got []string
				entries, err := os.ReadDir(tt.args[len(tt.args)-1])
				if err != nil {
					t.Fatal(err)
				}
				for _, e := range entries {
					got = append(got, e.Name())
				}
				if diff := cmp.Diff(tt.wantFiles, got); diff != "" {
					t.Errorf("files written (-want +got):\n%s", diff)
				}
			}
		})
	}
	for _, dir := range []string{"old", "both"} {
		if _, err := os.Stat(filepath.Join(tmp, dir)); !os.IsNotExist(err) {
			t.Errorf("%s: a refused render wrote it (%v)", dir, err)
		}
	}
}
