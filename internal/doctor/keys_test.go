package doctor

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pcsync/pcsync/pkg/adapters"
	"github.com/pcsync/pcsync/pkg/config"
)

func company(agents map[string]config.AdapterType, creds ...config.Credential) *config.Company {
	c := &config.Company{Metadata: config.Metadata{Name: "acme"}}
	for _, name := range []string{"coder", "dev", "ed", "rev"} {
		if t, ok := agents[name]; ok {
			c.Spec.Agents = append(c.Spec.Agents, config.Agent{Name: name, Adapter: t})
		}
	}
	c.Spec.Credentials = creds
	return c
}

func cred(name string, p adapters.Provider, secret, key string) config.Credential {
	return config.Credential{Name: name, Provider: p, Type: adapters.KeyAPIKey, SecretRef: config.CredentialSecretRef{Name: secret, Key: key}}
}

// TestKeysCheck: which agents doctor says hold a model key in their pods,
// and what it says to do.
func TestKeysCheck(t *testing.T) {
	claude := cred("claude", adapters.ProviderAnthropic, "model-keys", "anthropic")
	gpt := cred("gpt", adapters.ProviderOpenAI, "model-keys", "openai")
	tests := []struct {
		name string
		c    *config.Company
		mode config.EgressMode
		want Check
	}{
		{"no credentials", company(map[string]config.AdapterType{"coder": "claude_local", "rev": "codex_local"}), config.EgressProxy,
			Check{Area: "keys", Name: "acme", Status: StatusWarn, Detail: "2 of 2 agents hold a model key in their pods " +
				"(from the daemon's env or Paperclip's execute env; the agent can read it): coder (claude_local: anthropic), rev (codex_local: openai); " +
				"declare spec.credentials for anthropic, openai to keep those keys in the egress proxy"}},
		{"all held by the proxy", company(map[string]config.AdapterType{"coder": "claude_local", "rev": "codex_local"}, claude, gpt), config.EgressProxy,
			Check{Area: "keys", Name: "acme", Status: StatusOK,
				Detail: "no agent holds a model key in its pod: the egress proxy holds acme/claude (anthropic), acme/gpt (openai)"}},
		{"a provider of a multi-provider CLI undeclared", company(map[string]config.AdapterType{"coder": "claude_local", "dev": "opencode_local"}, claude), config.EgressProxy,
			Check{Area: "keys", Name: "acme", Status: StatusWarn, Detail: "1 of 2 agents hold a model key in their pods " +
				"(from the daemon's env or Paperclip's execute env; the agent can read it): dev (opencode_local: openai); " +
				"declare spec.credentials for openai to keep those keys in the egress proxy"}},
		{"a CLI no credential serves", company(map[string]config.AdapterType{"coder": "claude_local", "ed": "cursor_local"}, claude), config.EgressProxy,
			Check{Area: "keys", Name: "acme", Status: StatusInfo, Detail: "1 of 2 agents hold a model key in their pods " +
				"(from the daemon's env or Paperclip's execute env; the agent can read it): ed (cursor_local: its vendor's own key, which no credential can hold)"}},
		{"egress mode standard", company(map[string]config.AdapterType{"coder": "claude_local"}), config.EgressStandard,
			Check{Area: "keys", Name: "acme", Status: StatusInfo, Detail: "1 of 1 agents hold a model key in their pods " +
				"(from the daemon's env or Paperclip's execute env; the agent can read it): coder (claude_local: anthropic); " +
				"spec.credentials would keep the anthropic keys in the egress proxy, which egress mode standard does not run (egress mode proxy does)"}},
		{"no agents", company(nil), config.EgressProxy, Check{Area: "keys", Name: "acme", Status: StatusOK, Detail: "no agents"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, keysCheck(tt.c, tt.mode)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestCredentialRef: what the secrets row of a credential says when its
// Secret exists and when it does not.
func TestCredentialRef(t *testing.T) {
	c := company(map[string]config.AdapterType{"coder": "claude_local", "dev": "opencode_local", "rev": "codex_local"},
		cred("claude", adapters.ProviderAnthropic, "model-keys", "anthropic"))
	want := secretRef{name: "model-keys", status: StatusFail,
		found: `Secret of credential acme/claude exists (its key "anthropic" is not checked: pcsync does not read Secrets)`,
		missing: "Secret of credential acme/claude does not exist: the runs and leases of coder, dev (anthropic) fail before their pods start; " +
			`create it in namespace paperclip-acme with key "anthropic" (kubectl -n paperclip-acme create secret generic model-keys --from-file=anthropic=<file holding the key>)`}
	if diff := cmp.Diff(want, credentialRef(c, "paperclip-acme", c.Spec.Credentials[0]), cmp.AllowUnexported(secretRef{})); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
