package jsonschema

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	js "github.com/santhosh-tekuri/jsonschema/v6"
	"sigs.k8s.io/yaml"
)

func compileExported(t *testing.T) *js.Schema {
	t.Helper()
	b, err := Export(DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	doc, err := js.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("exported schema is not JSON: %v", err)
	}
	c := js.NewCompiler()
	if err := c.AddResource(ID, doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile(ID)
	if err != nil {
		t.Fatalf("exported schema does not compile as JSON Schema 2020-12: %v", err)
	}
	return s
}

func TestExportedSchemaValidatesDocuments(t *testing.T) {
	s := compileExported(t)
	tests := []struct {
		name      string
		doc       string
		wantError string // empty: valid
	}{
		{"settings empty spec", "apiVersion: pcsync.io/v1alpha1\nkind: Settings\nmetadata: {name: s}\nspec: {}\n", ""},
		{"settings with overrides", `apiVersion: pcsync.io/v1alpha1
kind: Settings
metadata: {name: s}
spec:
  namespacePrefix: team-
  server: {namespace: pc, podSelector: {tier: web}, port: 8080}
  egress: {mode: cilium}
  images: {registry: registry.example.com/mirror, allowList: ["ghcr.io/acme/*"], pullSecrets: [regcred]}
  defaults: {quota: {pods: 5}, jobs: {retain: true}}
  adapters: {claude_local: {image: "x/y:z", command: [claude, --debug]}}
`, ""},
		{"company", `apiVersion: pcsync.io/v1alpha1
kind: Company
metadata: {name: acme}
spec:
  id: c-1
  egress: {allowFqdns: [github.com], allowCidrs: [10.0.0.0/8, {cidr: 10.1.0.0/16, ports: [5432]}]}
  sessions: {size: 20Gi}
  agents:
  - {name: coder, adapter: claude_local, model: sonnet, env: {FOO: bar}, concurrency: 2}
`, ""},
		{"unknown spec field", "apiVersion: pcsync.io/v1alpha1\nkind: Company\nmetadata: {name: acme}\nspec: {id: x, colour: red}\n", "colour"},
		{"unknown adapter", "apiVersion: pcsync.io/v1alpha1\nkind: Company\nmetadata: {name: acme}\nspec: {id: x, agents: [{name: a, adapter: vim_local}]}\n", "adapter"},
		{"missing id", "apiVersion: pcsync.io/v1alpha1\nkind: Company\nmetadata: {name: acme}\nspec: {}\n", "id"},
		{"bad slug", "apiVersion: pcsync.io/v1alpha1\nkind: Company\nmetadata: {name: Acme_Corp}\nspec: {id: x}\n", "name"},
		{"bad egress mode", "apiVersion: pcsync.io/v1alpha1\nkind: Settings\nmetadata: {name: s}\nspec: {egress: {mode: calico}}\n", "mode"},
		{"wrong kind", "apiVersion: pcsync.io/v1alpha1\nkind: Tenant\nmetadata: {name: s}\nspec: {}\n", "kind"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j, err := yaml.YAMLToJSON([]byte(tt.doc))
			if err != nil {
				t.Fatal(err)
			}
			inst, err := js.UnmarshalJSON(bytes.NewReader(j))
			if err != nil {
				t.Fatal(err)
			}
			err = s.Validate(inst)
			switch {
			case tt.wantError == "" && err != nil:
				t.Errorf("valid document refused: %v", err)
			case tt.wantError != "" && err == nil:
				t.Errorf("invalid document accepted, want an error about %q", tt.wantError)
			case tt.wantError != "" && !strings.Contains(err.Error(), tt.wantError):
				t.Errorf("error %q does not mention %q", err, tt.wantError)
			}
		})
	}
}

func TestExportCarriesDefaultsAndDocs(t *testing.T) {
	b, err := Export(DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Defs map[string]struct {
			Properties map[string]struct {
				Default     any    `json:"default"`
				Description string `json:"description"`
			} `json:"properties"`
		} `json:"$defs"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	p := doc.Defs["SettingsSpec"].Properties["namespacePrefix"]
	if p.Default != "paperclip-" || !strings.Contains(p.Description, "Prefix") {
		t.Errorf("namespacePrefix = %+v, want the CUE default and doc comment", p)
	}
	if c := doc.Defs["Agent"].Properties["concurrency"]; c.Default != 1.0 {
		t.Errorf("Agent.concurrency default = %v, want 1", c.Default)
	}
	if _, err := Export(Options{Kinds: []string{"Nope"}}); err == nil {
		t.Error("Export of an unknown kind succeeded")
	}
}
