package adapters

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestEgressHosts(t *testing.T) {
	bedrock := map[string]string{"CLAUDE_CODE_USE_BEDROCK": "1", "AWS_REGION": "eu-central-1"}
	tests := []struct {
		name string
		typ  Type
		env  map[string]string
		want []string
	}{
		{"claude nothing extra", ClaudeLocal, nil, nil},
		{"claude base url with port and path", ClaudeLocal, map[string]string{"ANTHROPIC_BASE_URL": "https://LLM-Proxy.example.com:8443/anthropic/"},
			[]string{"llm-proxy.example.com"}},
		{"claude base url without scheme", ClaudeLocal, map[string]string{"ANTHROPIC_BASE_URL": "gateway.internal.example.org"},
			[]string{"gateway.internal.example.org"}},
		{"claude ip base url is not a host name", ClaudeLocal, map[string]string{"ANTHROPIC_BASE_URL": "http://10.0.0.5:4000"}, nil},
		{"claude bad base url", ClaudeLocal, map[string]string{"ANTHROPIC_BASE_URL": "https://exa mple.com"}, nil},
		{"claude bedrock", ClaudeLocal, bedrock,
			[]string{"bedrock-runtime.eu-central-1.amazonaws.com", "bedrock.eu-central-1.amazonaws.com", "sts.eu-central-1.amazonaws.com"}},
		{"claude bedrock default region and small model region", ClaudeLocal,
			map[string]string{"CLAUDE_CODE_USE_BEDROCK": "true", "AWS_DEFAULT_REGION": "us-west-2", "ANTHROPIC_SMALL_FAST_MODEL_AWS_REGION": "us-east-1",
				"ANTHROPIC_BEDROCK_BASE_URL": "https://bedrock.proxy.example.com"},
			[]string{"bedrock-runtime.us-east-1.amazonaws.com", "bedrock-runtime.us-west-2.amazonaws.com", "bedrock.proxy.example.com",
				"bedrock.us-east-1.amazonaws.com", "bedrock.us-west-2.amazonaws.com", "sts.us-east-1.amazonaws.com", "sts.us-west-2.amazonaws.com"}},
		{"claude bedrock region that is not one", ClaudeLocal, map[string]string{"CLAUDE_CODE_USE_BEDROCK": "1", "AWS_REGION": "evil.com/x"}, nil},
		{"claude bedrock off", ClaudeLocal, map[string]string{"CLAUDE_CODE_USE_BEDROCK": "0", "AWS_REGION": "eu-central-1"}, nil},
		{"codex base url", CodexLocal, map[string]string{"OPENAI_BASE_URL": "https://openai.proxy.example.com/v1", "ANTHROPIC_BASE_URL": "https://a.example.com"},
			[]string{"openai.proxy.example.com"}},
		{"codex ignores bedrock", CodexLocal, bedrock, nil},
		{"gemini base url", GeminiLocal, map[string]string{"GOOGLE_GEMINI_BASE_URL": "https://gemini.proxy.example.com"}, []string{"gemini.proxy.example.com"}},
		{"acpx every provider, deduplicated", AcpxLocal, map[string]string{
			"ANTHROPIC_BASE_URL": "https://proxy.example.com/anthropic", "OPENAI_BASE_URL": "https://proxy.example.com/openai",
			"GOOGLE_GEMINI_BASE_URL": "https://gem.example.com", "CLAUDE_CODE_USE_BEDROCK": "1", "AWS_REGION": "ap-southeast-2"},
			[]string{"bedrock-runtime.ap-southeast-2.amazonaws.com", "bedrock.ap-southeast-2.amazonaws.com", "gem.example.com",
				"proxy.example.com", "sts.ap-southeast-2.amazonaws.com"}},
		{"cursor nothing", CursorLocal, map[string]string{"ANTHROPIC_BASE_URL": "https://a.example.com"}, nil},
	}
	for _, tt := range tests {
		a, _ := Get(tt.typ)
		got := a.EgressHosts(tt.env)
		if diff := cmp.Diff(tt.want, got, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("%s: EgressHosts (-want +got):\n%s", tt.name, diff)
		}
		for _, h := range got {
			if !validHostname(h) {
				t.Errorf("%s: %q is not a valid host name", tt.name, h)
			}
		}
	}
}

func TestForwardEnvKeys(t *testing.T) {
	bedrockKeys := []string{"ANTHROPIC_BASE_URL", "ANTHROPIC_BEDROCK_BASE_URL", "ANTHROPIC_SMALL_FAST_MODEL_AWS_REGION", "AWS_ACCESS_KEY_ID",
		"AWS_BEARER_TOKEN_BEDROCK", "AWS_DEFAULT_REGION", "AWS_PROFILE", "AWS_REGION", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
		"CLAUDE_CODE_SKIP_BEDROCK_AUTH", "CLAUDE_CODE_USE_BEDROCK"}
	tests := []struct {
		name string
		typ  Type
		env  map[string]string
		want []string
	}{
		{"claude", ClaudeLocal, nil, []string{"ANTHROPIC_BASE_URL"}},
		{"claude bedrock", ClaudeLocal, map[string]string{"CLAUDE_CODE_USE_BEDROCK": "yes"}, bedrockKeys},
		{"codex", CodexLocal, map[string]string{"CLAUDE_CODE_USE_BEDROCK": "1"}, []string{"OPENAI_BASE_URL"}},
		{"gemini", GeminiLocal, nil, []string{"GOOGLE_GEMINI_BASE_URL"}},
		{"cursor", CursorLocal, nil, nil},
		{"opencode", OpencodeLocal, nil, nil},
		{"pi", PiLocal, nil, nil},
		{"acpx", AcpxLocal, nil, []string{"ANTHROPIC_BASE_URL", "GOOGLE_GEMINI_BASE_URL", "OPENAI_BASE_URL"}},
	}
	for _, tt := range tests {
		a, _ := Get(tt.typ)
		if diff := cmp.Diff(tt.want, a.ForwardEnvKeys(tt.env), cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("%s: ForwardEnvKeys (-want +got):\n%s", tt.name, diff)
		}
	}
}

func TestValidHostname(t *testing.T) {
	for h, want := range map[string]bool{
		"api.anthropic.com": true, "a": true, "x-1.example.com": true,
		"": false, "-a.com": false, "a-.com": false, "a..com": false, "1.2.3.4": false, "exa mple.com": false,
		"under_score.com": false, string(make([]byte, 254)): false,
	} {
		if got := validHostname(h); got != want {
			t.Errorf("validHostname(%q) = %v, want %v", h, got, want)
		}
	}
}

func TestEgressHostsForAndForwardEnvKeysFor(t *testing.T) {
	env := map[string]string{"CLAUDE_CODE_USE_BEDROCK": "1", "AWS_REGION": "us-east-2"}
	hosts, err := EgressHostsFor(ClaudeLocal, env)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"bedrock-runtime.us-east-2.amazonaws.com", "bedrock.us-east-2.amazonaws.com", "sts.us-east-2.amazonaws.com"}
	if diff := cmp.Diff(want, hosts); diff != "" {
		t.Errorf("EgressHostsFor (-want +got):\n%s", diff)
	}
	keys, err := ForwardEnvKeysFor(ClaudeLocal, env)
	if err != nil || len(keys) == 0 || keys[0] != "ANTHROPIC_BASE_URL" {
		t.Errorf("ForwardEnvKeysFor = %v, %v", keys, err)
	}
	if _, err := EgressHostsFor("nope", env); err == nil {
		t.Error("EgressHostsFor(nope) did not fail")
	}
	if _, err := ForwardEnvKeysFor("nope", env); err == nil {
		t.Error("ForwardEnvKeysFor(nope) did not fail")
	}
}
