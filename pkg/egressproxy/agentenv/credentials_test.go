package agentenv

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pcsync/pcsync/pkg/adapters"
	"github.com/pcsync/pcsync/pkg/config"
)

// TestCredentialsFor: which variables a credential sets per CLI and key
// kind, and none for a CLI that does not use the provider.
func TestCredentialsFor(t *testing.T) {
	c := &config.Company{}
	c.Spec.Credentials = []config.Credential{
		{Name: "oai", Provider: adapters.ProviderOpenAI, Type: adapters.KeyAPIKey},
		{Name: "ant", Provider: adapters.ProviderAnthropic, Type: adapters.KeyOAuthToken},
	}
	tests := []struct {
		adapter config.AdapterType
		want    *Credentials
	}{
		// codex exec reads CODEX_API_KEY, other OpenAI clients OPENAI_API_KEY.
		{"codex_local", &Credentials{Token: "T", Set: map[string]string{"OPENAI_API_KEY": "T", "CODEX_API_KEY": "T",
			"OPENAI_BASE_URL": "http://10.0.0.1:3128/credentials/oai/v1"}}},
		{"claude_local", &Credentials{Token: "T", Set: map[string]string{"CLAUDE_CODE_OAUTH_TOKEN": "T", "ANTHROPIC_AUTH_TOKEN": "T",
			"ANTHROPIC_BASE_URL": "http://10.0.0.1:3128/credentials/ant"}, Blank: []string{"ANTHROPIC_API_KEY"}}},
		{"gemini_local", nil},
		{"cursor_local", nil},
	}
	for _, tc := range tests {
		got := CredentialsFor(c, tc.adapter, "10.0.0.1", "T")
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.adapter, diff)
		}
	}
}

func TestKeyVars(t *testing.T) {
	c := &config.Company{}
	c.Spec.Credentials = []config.Credential{{Name: "ant", Provider: adapters.ProviderAnthropic, Type: adapters.KeyAPIKey}}
	rc := CredentialsFor(c, adapters.ClaudeLocal, "10.0.0.1", "T")
	got := rc.KeyVars(map[string]string{"ANTHROPIC_API_KEY": "sk", "CLAUDE_CODE_OAUTH_TOKEN": "o", "ANTHROPIC_BASE_URL": "https://x", "OTHER": "1", "ANTHROPIC_AUTH_TOKEN": ""})
	if diff := cmp.Diff([]string{"ANTHROPIC_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN"}, got); diff != "" {
		t.Errorf("KeyVars (-want +got):\n%s", diff)
	}
}

// TestWithToken: the copy gives the new token wherever the old one was,
// the base URL unchanged, and the original is left as it was.
func TestWithToken(t *testing.T) {
	c := &config.Company{}
	c.Spec.Credentials = []config.Credential{{Name: "ant", Provider: adapters.ProviderAnthropic, Type: adapters.KeyAPIKey}}
	rc := CredentialsFor(c, adapters.ClaudeLocal, "10.0.0.1", "stand-in")
	got := rc.WithToken("T")
	want := CredentialsFor(c, adapters.ClaudeLocal, "10.0.0.1", "T")
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("WithToken (-want +got):\n%s", diff)
	}
	if rc.Token != "stand-in" || rc.Set["ANTHROPIC_API_KEY"] != "stand-in" {
		t.Errorf("the original changed: %+v", rc)
	}
}

// TestCredentialsForHeader: a header credential gives every CLI its
// variables, the route's URL and the run's token, which Secret tells.
func TestCredentialsForHeader(t *testing.T) {
	c := &config.Company{}
	c.Spec.Credentials = []config.Credential{{Name: "registry", Provider: adapters.ProviderHeader, Type: adapters.KeyAPIKey,
		Header: &config.CredentialHeader{Name: "X-Registry-Token", URLEnv: "REGISTRY_URL", TokenEnv: "REGISTRY_TOKEN"}}}
	want := &Credentials{Token: "T", Set: map[string]string{
		"REGISTRY_URL": "http://10.0.0.1:3128/credentials/registry", "REGISTRY_TOKEN": "T"}}
	for _, a := range []config.AdapterType{"codex_local", "cursor_local"} {
		got := CredentialsFor(c, a, "10.0.0.1", "T")
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", a, diff)
		}
		if got.Secret(got.Set["REGISTRY_URL"]) || !got.Secret(got.Set["REGISTRY_TOKEN"]) {
			t.Errorf("%s: Secret tells the token from the URL wrongly", a)
		}
	}
}
