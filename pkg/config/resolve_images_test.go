package config_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pcsync/pcsync/pkg/config"
)

// The built-in images are pcsync's own, placed in the configured registry,
// else the registry pcsync runs from, with pcsync's tag; an image that the
// config names itself is kept as it is.
func TestBuiltinImages(t *testing.T) {
	own := "registry.example.com/own/claude:3"
	tests := []struct {
		name      string
		settings  config.Images
		overrides map[config.AdapterType]config.AdapterOverride
		defaults  config.ImageDefaults
		agent     config.Agent
		want      string
		hasServer bool
	}{
		{
			name:     "Settings registry",
			settings: config.Images{Registry: "registry.example.com/platform/"},
			defaults: config.ImageDefaults{Registry: "in-cluster.example.com:5000/pcsync", Tag: "v1.4.0"},
			agent:    config.Agent{Adapter: "claude_local"},
			want:     "registry.example.com/platform/pcsync-agent-claude:v1.4.0", hasServer: true,
		},
		{
			name:     "registry of pcsync's own image",
			defaults: config.ImageDefaults{Registry: "in-cluster.example.com:5000/pcsync", Tag: "v1.4.0"},
			agent:    config.Agent{Adapter: "codex_local"},
			want:     "in-cluster.example.com:5000/pcsync/pcsync-agent-codex:v1.4.0", hasServer: true,
		},
		{
			name:  "no registry known",
			agent: config.Agent{Adapter: "pi_local"},
			want:  "pcsync-agent-pi:dev", hasServer: true,
		},
		{
			name:     "the agent's own image",
			settings: config.Images{Registry: "registry.example.com/platform"},
			agent:    config.Agent{Adapter: "claude_local", Image: own},
			want:     own,
		},
		{
			name:      "Settings spec.adapters image",
			settings:  config.Images{Registry: "registry.example.com/platform"},
			overrides: map[config.AdapterType]config.AdapterOverride{"claude_local": {Image: &own}},
			agent:     config.Agent{Adapter: "claude_local"},
			want:      own,
		},
		{
			name:     "the agent's own image is the built-in one",
			settings: config.Images{Registry: "registry.example.com/platform"},
			agent:    config.Agent{Adapter: "codex_local", Image: "registry.example.com/platform/pcsync-agent-claude:dev"},
			want:     "registry.example.com/platform/pcsync-agent-claude:dev", hasServer: true,
		},
		{
			name:      "Settings spec.adapters without an image",
			settings:  config.Images{Registry: "registry.example.com/platform"},
			overrides: map[config.AdapterType]config.AdapterOverride{"claude_local": {Command: []string{"claude2"}}},
			agent:     config.Agent{Adapter: "claude_local"},
			want:      "registry.example.com/platform/pcsync-agent-claude:dev", hasServer: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := &config.Model{
				Builtin: map[config.AdapterType]config.AdapterDefaults{
					"claude_local": {Image: "pcsync-agent-claude"},
					"codex_local":  {Image: "pcsync-agent-codex"},
					"pi_local":     {Image: "pcsync-agent-pi"},
				},
				Images: tt.defaults,
			}
			m.Settings.Spec.Images = tt.settings
			m.Settings.Spec.Adapters = tt.overrides
			got := struct {
				Image     string
				HasServer bool
			}{m.AgentImage(&tt.agent), m.ImageHasServer(m.AgentImage(&tt.agent))}
			want := struct {
				Image     string
				HasServer bool
			}{tt.want, tt.hasServer}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("image (-want +got):\n%s", diff)
			}
		})
	}
}
