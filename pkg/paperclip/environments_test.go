package paperclip

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/ptr"

	"github.com/pcsync/pcsync/pkg/config"
)

// envModel is model() with a sandbox environment and an agent in it.
func envModel(env map[string]any) *config.Model {
	m := model(config.Agent{Name: "coder", Adapter: "cursor_local", Paperclip: config.PaperclipAgent{
		Environment: "k8s", AdapterConfig: map[string]any{"engine": "cli", "env": env},
	}})
	m.Companies[0].Spec.Paperclip.Environments = []config.PaperclipEnvironment{{Name: "k8s", Image: "img:1", Prestart: ptr.To(false), ReuseLease: ptr.To(true), RunnerLifecycleMode: "warm"}}
	return m
}

func TestDesireEnvironmentAgent(t *testing.T) {
	dc := Desire(envModel(map[string]any{"KEY": "v1"}))[0]
	if diff := cmp.Diff([]DesiredEnvironment{{Name: "k8s", Config: map[string]any{
		"provider": "pcsync", "company": "acme", "image": "img:1", "prestart": false, "reuseLease": true, "runnerLifecycleMode": "warm",
	}}}, dc.Environments); diff != "" {
		t.Errorf("environments (-want +got):\n%s", diff)
	}
	resolveEnvironments(&dc, map[string]string{"k8s": "env-1"})
	want := map[string]any{
		"name": "coder", "role": "general", "adapterType": "cursor", "defaultEnvironmentId": "env-1",
		"adapterConfig.engine": "cli",
		"adapterConfig.env":    map[string]any{"KEY": map[string]any{"type": "plain", "value": "v1"}},
	}
	if diff := cmp.Diff(want, dc.Agents[0].Fields); diff != "" {
		t.Errorf("fields (-want +got):\n%s", diff)
	}
	fresh := Desire(envModel(nil))[0]
	resolveEnvironments(&fresh, map[string]string{})
	if got := fresh.Agents[0].Fields["defaultEnvironmentId"]; got != "(environment k8s, to be created)" {
		t.Errorf("defaultEnvironmentId of an environment not created yet: %v", got)
	}
}

// TestPlanRedactedEnv: Paperclip shows adapterConfig.env values redacted;
// they count as declared until the declaration changes.
func TestPlanRedactedEnv(t *testing.T) {
	dc := Desire(envModel(map[string]any{"KEY": "v1"}))[0]
	resolveEnvironments(&dc, map[string]string{"k8s": "env-1"})
	live := liveOf("a1", dc.Agents[0], nil)
	live.DefaultEnvironmentID = ptr.To("env-1")
	live.AdapterConfig["env"] = map[string]any{"KEY": map[string]any{"type": "plain", "value": redactedValue}}
	if p := Plan(dc, []Agent{live}); p.Actions[0].Verb != VerbNone {
		t.Errorf("redacted env as declared: %s %+v, want unchanged", p.Actions[0].Verb, p.Actions[0].Changes)
	}
	changed := Desire(envModel(map[string]any{"KEY": "v2"}))[0]
	resolveEnvironments(&changed, map[string]string{"k8s": "env-1"})
	p := Plan(changed, []Agent{live})
	if a := p.Actions[0]; a.Verb != VerbUpdate || len(a.Changes) != 1 || a.Changes[0].Path != "adapterConfig.env" {
		t.Errorf("env value changed in Git: %s %+v, want an update of adapterConfig.env", a.Verb, a.Changes)
	}
	if got := shown("adapterConfig.env", p.Actions[0].Changes[0].To); cmp.Diff(map[string]any{"KEY": "[redacted]"}, got) != "" {
		t.Errorf("a report shows the env as %v", got)
	}
}
