package images

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pcsync/pcsync/pkg/adapters"
)

func TestRef(t *testing.T) {
	tests := []struct {
		registry, name, tag, want string
	}{
		{"ghcr.io/pcsync", Base, "v1.2.3", "ghcr.io/pcsync/pcsync-agent-base:v1.2.3"},
		{"127.0.0.1:5000", Agent("claude"), "dev", "127.0.0.1:5000/pcsync-agent-claude:dev"},
		{"registry.example:443/org/team", Pcsync, "v0.1.0-3-gabc", "registry.example:443/org/team/pcsync:v0.1.0-3-gabc"},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, Ref(tt.registry, tt.name, tt.tag)); diff != "" {
			t.Errorf("Ref(%q, %q, %q) (-want +got):\n%s", tt.registry, tt.name, tt.tag, diff)
		}
	}
}

func TestAgentImage(t *testing.T) {
	tests := []struct {
		typ  adapters.Type
		want string
	}{
		{adapters.ClaudeLocal, "pcsync-agent-claude"},
		{adapters.CodexLocal, "pcsync-agent-codex"},
		{adapters.GeminiLocal, "pcsync-agent-gemini"},
		{adapters.CursorLocal, "pcsync-agent-cursor"},
		{adapters.OpencodeLocal, "pcsync-agent-opencode"},
		{adapters.PiLocal, "pcsync-agent-pi"},
		{adapters.AcpxLocal, "pcsync-agent-acpx"},
		{"http", ""},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, AgentImage(tt.typ)); diff != "" {
			t.Errorf("AgentImage(%s) (-want +got):\n%s", tt.typ, diff)
		}
	}
}

// TestAgentsPinCheckedVersions fails when an agent image does not install
// the release adapters.CheckedVersions names, or its binary is not the
// adapter's command; cursor_local alone has no image.
func TestAgentsPinCheckedVersions(t *testing.T) {
	want := map[adapters.Type]string{}
	for typ, v := range adapters.CheckedVersions() {
		if typ != adapters.CursorLocal {
			want[typ] = v + " " + adapters.BuiltinDefaults()[typ].Command[0]
		}
	}
	got := map[adapters.Type]string{}
	var unavailable []adapters.Type
	for _, s := range Agents() {
		if s.Unavailable != "" {
			unavailable = append(unavailable, s.Adapter)
			continue
		}
		got[s.Adapter] = s.Package + " " + s.Version + " " + s.Binary
		if strings.Contains(s.Version, "latest") || s.Version == "" {
			t.Errorf("%s: version %q is not pinned", s.Name, s.Version)
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("agent images vs adapters.CheckedVersions (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]adapters.Type{adapters.CursorLocal}, unavailable); diff != "" {
		t.Errorf("unavailable images (-want +got):\n%s", diff)
	}
	if u := Unbuildable(); len(u) != 1 || u[adapters.CursorLocal] == "" {
		t.Errorf("Unbuildable() = %v, want cursor_local's reason only", u)
	}
}

// TestAgentsACP fails when the claude or codex image loses the ACP agent
// server that Paperclip's default engine runs in a sandbox (by the bare
// name Binary), or another image gains one; and when npm's command, which
// both builds run, does not install it beside the CLI.
func TestAgentsACP(t *testing.T) {
	want := map[string]string{
		Agent("claude"): "@agentclientprotocol/claude-agent-acp@0.73.0 claude-agent-acp",
		Agent("codex"):  "@agentclientprotocol/codex-acp@1.13.1 codex-acp",
	}
	got := map[string]string{}
	for _, s := range Agents() {
		if s.ACP == (NPMPackage{}) {
			if s.ACPProbe() != nil {
				t.Errorf("%s: no ACP server, but ACPProbe = %q", s.Name, s.ACPProbe())
			}
			continue
		}
		got[s.Name] = s.ACP.Spec() + " " + s.ACP.Binary
		args := s.NPMInstallArgs("/usr/local")
		if diff := cmp.Diff([]string{s.Package + "@" + s.Version, s.ACP.Spec()}, args[len(args)-2:]); diff != "" {
			t.Errorf("%s: npm %q installs (-want +got):\n%s", s.Name, args, diff)
		}
		probe := s.ACPProbe()
		if diff := cmp.Diff([]string{"/usr/local/bin/node", "-e", s.ACP.Binary, ACPInitializeRequest}, []string{probe[0], probe[1], probe[3], probe[4]}); diff != "" {
			t.Errorf("%s: ACPProbe (-want +got):\n%s", s.Name, diff)
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ACP servers of the agent images (-want +got):\n%s", diff)
	}
}

func TestAllAndLookup(t *testing.T) {
	var names []string
	for _, s := range All() {
		names = append(names, s.Name)
		got, err := Lookup(s.Name)
		if err != nil {
			t.Errorf("Lookup(%s): %v", s.Name, err)
		} else if diff := cmp.Diff(s, got); diff != "" {
			t.Errorf("Lookup(%s) (-want +got):\n%s", s.Name, diff)
		}
	}
	want := []string{"pcsync-agent-base", "pcsync-agent-claude", "pcsync-agent-codex", "pcsync-agent-gemini",
		"pcsync-agent-opencode", "pcsync-agent-pi", "pcsync-agent-acpx", "pcsync"}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("All (-want +got):\n%s", diff)
	}
	for _, name := range []string{"pcsync-agent-cursor", "nope"} {
		if _, err := Lookup(name); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("Lookup(%s) = %v, want an error naming it", name, err)
		}
	}
}

func TestConfig(t *testing.T) {
	b := DefaultBase()
	claude, err := Lookup(Agent("claude"))
	if err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{SourceLabel: "https://github.com/pcsync/pcsync", VersionLabel: "v1", ServerLabel: ServerPath}
	tests := []struct {
		spec Spec
		want Config
	}{
		{Spec{Name: Base}, Config{User: "1000:1000", Env: []string{"PATH=" + b.Path, "HOME=/home/agent"}, WorkingDir: "/workspace",
			Entrypoint: []string{"/usr/bin/tini", "-g", "--"}, Labels: labels}},
		{claude, Config{User: "1000:1000", Env: []string{"PATH=" + b.Path, "HOME=/home/agent"}, WorkingDir: "/workspace",
			Entrypoint: []string{"/usr/bin/tini", "-g", "--"},
			Labels: map[string]string{SourceLabel: labels[SourceLabel], VersionLabel: "v1", ServerLabel: ServerPath, CLILabel: "@anthropic-ai/claude-code@2.1.197",
				ACPLabel: "@agentclientprotocol/claude-agent-acp@0.73.0"}}},
		{Spec{Name: Pcsync, From: Base}, Config{User: "65532:65532", Env: []string{"PATH=" + b.Path, "HOME=/home/agent"}, WorkingDir: "/workspace",
			Entrypoint: []string{"/usr/bin/tini", "--", ServerPath}, Labels: labels}},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, tt.spec.Config(b, "v1")); diff != "" {
			t.Errorf("%s: Config (-want +got):\n%s", tt.spec.Name, diff)
		}
	}
}
