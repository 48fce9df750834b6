package schema

import (
	"encoding/json"
	"strings"
	"testing"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/cuecontext"
	"github.com/google/go-cmp/cmp"
)

func compile(t *testing.T) (*cue.Context, cue.Value) {
	t.Helper()
	ctx := cuecontext.New()
	v, err := Compile(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return ctx, v
}

// fill validates a JSON document against a kind's definition and returns
// the result with defaults, or the validation error.
func fill(t *testing.T, ctx *cue.Context, s cue.Value, kind, doc string) (map[string]any, error) {
	t.Helper()
	p, ok := Definition(kind)
	if !ok {
		t.Fatalf("no definition for %s", kind)
	}
	d := ctx.CompileString(doc)
	if d.Err() != nil {
		t.Fatal(d.Err())
	}
	v := s.LookupPath(p).Unify(d)
	if err := v.Validate(cue.Concrete(true), cue.All()); err != nil {
		return nil, err
	}
	b, err := v.MarshalJSON()
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m, nil
}

func TestSettingsDefaults(t *testing.T) {
	ctx, s := compile(t)
	got, err := fill(t, ctx, s, "Settings", `{apiVersion: "pcsync.io/v1alpha1", kind: "Settings", metadata: name: "s", spec: {}}`)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"namespacePrefix": "paperclip-",
		"server":          map[string]any{"namespace": "paperclip", "podSelector": map[string]any{"app": "paperclip-server"}, "port": 3100.0},
		"pcsync":          map[string]any{"serviceAccount": map[string]any{"name": "pcsync", "namespace": "pcsync-system"}},
		"egress":          map[string]any{"mode": "proxy", "metricsNamespace": "monitoring", "proxyIdleSec": float64(600)},
		"images":          map[string]any{"allowList": []any{}, "pullSecrets": []any{}},
		"inherit":         map[string]any{"imagePullSecrets": true, "dnsConfig": true},
		"defaults": map[string]any{
			"quota": map[string]any{"pods": 20.0, "requestsCpu": "10", "requestsMemory": "20Gi", "limitsCpu": "20", "limitsMemory": "40Gi", "limitsEphemeralStorage": "200Gi"},
			"limitRange": map[string]any{
				"max":            map[string]any{"cpu": "4", "memory": "8Gi"},
				"min":            map[string]any{"cpu": "100m", "memory": "128Mi"},
				"default":        map[string]any{"cpu": "1", "memory": "2Gi", "ephemeralStorage": "10Gi"},
				"defaultRequest": map[string]any{"cpu": "250m", "memory": "512Mi", "ephemeralStorage": "256Mi"},
			},
			"jobs":      map[string]any{"ttlSecondsAfterFinished": 900.0, "activeDeadlineSeconds": 3600.0, "retain": false, "emptyDirSizeLimit": "8Gi"},
			"resources": map[string]any{"requests": map[string]any{"cpu": "250m", "memory": "512Mi"}, "limits": map[string]any{"cpu": "2", "memory": "4Gi"}},
		},
		"adapters":           map[string]any{},
		"patches":            []any{},
		"allowUnsafePatches": []any{},
	}
	if diff := cmp.Diff(want, got["spec"]); diff != "" {
		t.Errorf("Settings defaults (-want +got):\n%s", diff)
	}
}

func TestOverridesReplaceDefaults(t *testing.T) {
	ctx, s := compile(t)
	got, err := fill(t, ctx, s, "Settings", `{apiVersion: "pcsync.io/v1alpha1", kind: "Settings", metadata: name: "s",
		spec: {server: podSelector: {tier: "web"}, defaults: quota: pods: 5, defaults: limitRange: max: cpu: 8}}`)
	if err != nil {
		t.Fatal(err)
	}
	spec := got["spec"].(map[string]any)
	if diff := cmp.Diff(map[string]any{"tier": "web"}, spec["server"].(map[string]any)["podSelector"]); diff != "" {
		t.Errorf("podSelector must be replaced, not merged (-want +got):\n%s", diff)
	}
	d := spec["defaults"].(map[string]any)
	if p := d["quota"].(map[string]any)["pods"]; p != 5.0 {
		t.Errorf("quota.pods = %v, want 5", p)
	}
	if c := d["limitRange"].(map[string]any)["max"].(map[string]any)["cpu"]; c != 8.0 {
		t.Errorf("limitRange.max.cpu = %v, want 8", c)
	}
}

func TestRejects(t *testing.T) {
	ctx, s := compile(t)
	tests := []struct {
		name, kind, doc, wantFragment string
	}{
		{"unknown settings field", "Settings", `{apiVersion: "pcsync.io/v1alpha1", kind: "Settings", metadata: name: "s", spec: {bogus: 1}}`, "field not allowed"},
		{"bad prefix", "Settings", `{apiVersion: "pcsync.io/v1alpha1", kind: "Settings", metadata: name: "s", spec: namespacePrefix: "Bad_"}`, "namespacePrefix"},
		{"slug too long", "Company", `{apiVersion: "pcsync.io/v1alpha1", kind: "Company", metadata: name: "` + strings.Repeat("a", 44) + `", spec: id: "x"}`, "metadata.name"},
		{"missing id", "Company", `{apiVersion: "pcsync.io/v1alpha1", kind: "Company", metadata: name: "acme", spec: {}}`, "spec.id"},
		{"unknown adapter", "Company", `{apiVersion: "pcsync.io/v1alpha1", kind: "Company", metadata: name: "acme", spec: {id: "x", agents: [{name: "a", adapter: "vim_local"}]}}`, "adapter"},
		{"unknown agent field", "Company", `{apiVersion: "pcsync.io/v1alpha1", kind: "Company", metadata: name: "acme", spec: {id: "x", agents: [{name: "a", adapter: "claude_local", colour: "red"}]}}`, "field not allowed"},
		{"bad env name", "Company", `{apiVersion: "pcsync.io/v1alpha1", kind: "Company", metadata: name: "acme", spec: {id: "x", agents: [{name: "a", adapter: "claude_local", env: {"1X": "y"}}]}}`, "field not allowed"},
		{"prompt too large", "Run", `{apiVersion: "pcsync.io/v1alpha1", kind: "Run", company: "acme", agent: "a", prompt: "` + strings.Repeat("x", 1048577) + `"}`, "larger than 1 MiB"},
		{"empty prompt", "Run", `{apiVersion: "pcsync.io/v1alpha1", kind: "Run", company: "acme", agent: "a", prompt: ""}`, "prompt"},
		{"bad run id", "Run", `{apiVersion: "pcsync.io/v1alpha1", kind: "Run", company: "acme", agent: "a", prompt: "p", runId: "Not_OK"}`, "runId"},
		{"run chooses image", "Run", `{apiVersion: "pcsync.io/v1alpha1", kind: "Run", company: "acme", agent: "a", prompt: "p", image: "evil"}`, "field not allowed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := fill(t, ctx, s, tt.kind, tt.doc)
			if err == nil {
				t.Fatalf("accepted, want an error containing %q", tt.wantFragment)
			}
			if !strings.Contains(err.Error(), tt.wantFragment) {
				t.Errorf("error %q does not contain %q", err, tt.wantFragment)
			}
		})
	}
}

func TestCompanyDefaultsAndRun(t *testing.T) {
	ctx, s := compile(t)
	got, err := fill(t, ctx, s, "Company", `{apiVersion: "pcsync.io/v1alpha1", kind: "Company", metadata: name: "acme",
		spec: {id: "c1", sessions: {}, egress: allowCidrs: ["10.1.0.0/16", {cidr: "10.2.0.0/16"}], agents: [{name: "coder", adapter: "claude_local"}]}}`)
	if err != nil {
		t.Fatal(err)
	}
	spec := got["spec"].(map[string]any)
	agent := spec["agents"].([]any)[0]
	want := map[string]any{"name": "coder", "adapter": "claude_local", "extraArgs": []any{}, "env": map[string]any{}, "concurrency": 1.0, "timeoutSec": 0.0, "graceSec": 60.0, "paperclip": map[string]any{"role": "general"}}
	if diff := cmp.Diff(want, agent); diff != "" {
		t.Errorf("agent defaults (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]any{"size": "10Gi"}, spec["sessions"]); diff != "" {
		t.Errorf("sessions defaults (-want +got):\n%s", diff)
	}
	wantCidrs := []any{"10.1.0.0/16", map[string]any{"cidr": "10.2.0.0/16", "ports": []any{443.0}, "protocol": "TCP"}}
	if diff := cmp.Diff(wantCidrs, spec["egress"].(map[string]any)["allowCidrs"]); diff != "" {
		t.Errorf("allowCidrs (-want +got):\n%s", diff)
	}
	if _, err := fill(t, ctx, s, "Run", `{apiVersion: "pcsync.io/v1alpha1", kind: "Run", company: "acme", agent: "coder", prompt: "hi", context: {taskId: "T-1", attempt: 2}}`); err != nil {
		t.Errorf("valid run refused: %v", err)
	}
}

func TestAdapterDefaultsComplete(t *testing.T) {
	_, s := compile(t)
	v := s.LookupPath(AdapterDefaults())
	b, err := v.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]struct {
		Image      string   `json:"image"`
		EnvKeys    []string `json:"envKeys"`
		AllowFqdns []string `json:"allowFqdns"`
		Command    []string `json:"command"`
	}
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, typ := range []string{"claude_local", "codex_local", "gemini_local", "cursor_local", "opencode_local", "pi_local", "acpx_local"} {
		d, ok := m[typ]
		if !ok || d.Image == "" || len(d.Command) == 0 || len(d.EnvKeys) == 0 || len(d.AllowFqdns) == 0 {
			t.Errorf("adapter %s defaults incomplete: %+v", typ, d)
		}
	}
	if m["claude_local"].Image != "pcsync-agent-claude" {
		t.Errorf("claude image = %q", m["claude_local"].Image)
	}
}
