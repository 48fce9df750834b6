package agentenv

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pcsync/pcsync/pkg/adapters"
	"github.com/pcsync/pcsync/pkg/config"
)

// TestCredentialsForGitHub: GitHub credentials give every CLI git's
// config (github.com's and an Enterprise host's forms to their routes, the
// token in a header for the route only), the first one's API URLs,
// GITHUB_TOKEN and gh's variables (its route, config directory and token;
// an Enterprise host's name and token variable when the first is one), and
// blank the other token variables; the token is in no value but those,
// which Secret tells.
func TestCredentialsForGitHub(t *testing.T) {
	c := &config.Company{}
	c.Spec.Credentials = []config.Credential{
		{Name: "gh", Provider: adapters.ProviderGitHub, Type: adapters.KeyAPIKey},
		{Name: "ghe", Provider: adapters.ProviderGitHub, Type: adapters.KeyAPIKey, Host: "ghe.example.com"},
	}
	r := "http://10.0.0.1:3128/credentials/"
	want := &Credentials{Token: "T", Set: map[string]string{
		"GIT_CONFIG_COUNT": "10",
		"GIT_CONFIG_KEY_0": "url." + r + "gh/git/.insteadOf", "GIT_CONFIG_VALUE_0": "https://github.com/",
		"GIT_CONFIG_KEY_1": "url." + r + "gh/git/.insteadOf", "GIT_CONFIG_VALUE_1": "git@github.com:",
		"GIT_CONFIG_KEY_2": "url." + r + "gh/git/.insteadOf", "GIT_CONFIG_VALUE_2": "ssh://git@github.com/",
		"GIT_CONFIG_KEY_3": "http." + r + "gh/git/.proxy", "GIT_CONFIG_VALUE_3": "",
		"GIT_CONFIG_KEY_4": "http." + r + "gh/git/.extraHeader", "GIT_CONFIG_VALUE_4": "Authorization: Bearer T",
		"GIT_CONFIG_KEY_5": "url." + r + "ghe/git/.insteadOf", "GIT_CONFIG_VALUE_5": "https://ghe.example.com/",
		"GIT_CONFIG_KEY_6": "url." + r + "ghe/git/.insteadOf", "GIT_CONFIG_VALUE_6": "git@ghe.example.com:",
		"GIT_CONFIG_KEY_7": "url." + r + "ghe/git/.insteadOf", "GIT_CONFIG_VALUE_7": "ssh://git@ghe.example.com/",
		"GIT_CONFIG_KEY_8": "http." + r + "ghe/git/.proxy", "GIT_CONFIG_VALUE_8": "",
		"GIT_CONFIG_KEY_9": "http." + r + "ghe/git/.extraHeader", "GIT_CONFIG_VALUE_9": "Authorization: Bearer T",
		"GITHUB_API_URL": r + "gh/api", "GITHUB_GRAPHQL_URL": r + "gh/graphql", "GITHUB_TOKEN": "T",
		"PCSYNC_GITHUB_ROUTE": r + "gh/", "GH_CONFIG_DIR": "/tmp/pcsync-gh", "GH_TOKEN": "T",
	}, Blank: []string{"GH_ENTERPRISE_TOKEN", "GITHUB_ENTERPRISE_TOKEN"}}
	for _, a := range []config.AdapterType{"claude_local", "cursor_local"} {
		got := CredentialsFor(c, a, "10.0.0.1", "T")
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", a, diff)
		}
	}
	rc := CredentialsFor(c, "claude_local", "10.0.0.1", "T").WithToken("pcsync-run-2")
	var secret []string
	for k, v := range rc.Set {
		if rc.Secret(v) {
			secret = append(secret, k)
		}
	}
	if diff := cmp.Diff([]string{"GH_TOKEN", "GITHUB_TOKEN", "GIT_CONFIG_VALUE_4", "GIT_CONFIG_VALUE_9"}, slices.Sorted(slices.Values(secret))); diff != "" {
		t.Errorf("the values that hold the token (-want +got):\n%s", diff)
	}
	if rc.Set["GIT_CONFIG_VALUE_4"] != "Authorization: Bearer pcsync-run-2" {
		t.Errorf("WithToken: the header %q", rc.Set["GIT_CONFIG_VALUE_4"])
	}
}

// TestGitHubOnly: the GitHub part of a company's credentials, without a
// model credential's variables; none without a GitHub credential.
func TestGitHubOnly(t *testing.T) {
	c := &config.Company{}
	c.Spec.Credentials = []config.Credential{
		{Name: "ant", Provider: adapters.ProviderAnthropic, Type: adapters.KeyAPIKey},
		{Name: "gh", Provider: adapters.ProviderGitHub, Type: adapters.KeyAPIKey},
	}
	got := CredentialsFor(c, "claude_local", "10.0.0.1", "T").GitHubOnly()
	onlyGH := &config.Company{}
	onlyGH.Spec.Credentials = c.Spec.Credentials[1:]
	if diff := cmp.Diff(CredentialsFor(onlyGH, "claude_local", "10.0.0.1", "T"), got); diff != "" {
		t.Errorf("GitHubOnly (-want +got):\n%s", diff)
	}
	c.Spec.Credentials = c.Spec.Credentials[:1]
	if got := CredentialsFor(c, "claude_local", "10.0.0.1", "T").GitHubOnly(); got != nil {
		t.Errorf("GitHubOnly without a GitHub credential: %+v", got)
	}
}

// TestCredentialsForGitHubEnterprise: an Enterprise credential first gives
// gh its host and its Enterprise token variable.
func TestCredentialsForGitHubEnterprise(t *testing.T) {
	c := &config.Company{}
	c.Spec.Credentials = []config.Credential{{Name: "ghe", Provider: adapters.ProviderGitHub, Type: adapters.KeyAPIKey, Host: "ghe.example.com"}}
	rc := CredentialsFor(c, "claude_local", "10.0.0.1", "T")
	got := map[string]string{}
	for _, k := range []string{"PCSYNC_GITHUB_ROUTE", "GH_HOST", "GH_TOKEN", "GH_ENTERPRISE_TOKEN", "GITHUB_TOKEN"} {
		got[k] = rc.Set[k]
	}
	want := map[string]string{"PCSYNC_GITHUB_ROUTE": "http://10.0.0.1:3128/credentials/ghe/", "GH_HOST": "ghe.example.com",
		"GH_TOKEN": "T", "GH_ENTERPRISE_TOKEN": "T", "GITHUB_TOKEN": "T"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"GITHUB_ENTERPRISE_TOKEN"}, rc.Blank); diff != "" {
		t.Errorf("blanked (-want +got):\n%s", diff)
	}
}
