package sandbox

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// serverEnv is a sample of what Paperclip hands an install-detect execute:
// the server's whole process environment next to the run's own keys.
var serverEnv = map[string]string{
	"PAPERCLIP_AGENT_JWT_SECRET":        "signing-key",
	"PAPERCLIP_SECRETS_MASTER_KEY_FILE": "/paperclip/master.key",
	"PAPERCLIP_HOME":                    "/paperclip",
	"PAPERCLIP_DEPLOYMENT_MODE":         "local_trusted",
	"PAPERCLIP_PUBLIC_URL":              "http://paperclip",
	"DATABASE_URL":                      "postgres://u:p@db/paperclip",
	"BETTER_AUTH_SECRET":                "auth",
	"KUBERNETES_SERVICE_HOST":           "10.0.0.1",
	"NODE_OPTIONS":                      "--max-old-space-size=4096",
	"MY_DB_PASSWORD":                    "hunter2",
	"GITHUB_TOKEN":                      "ghp",
	"HOSTNAME":                          "paperclip-0",
	// The run's own.
	"PAPERCLIP_API_KEY":      "run-jwt",
	"PAPERCLIP_API_URL":      "http://paperclip:3100",
	"PAPERCLIP_RUN_ID":       "r1",
	"PAPERCLIP_AGENT_ID":     "a1",
	"PAPERCLIP_WAKE_REASON":  "manual",
	"PAPERCLIP_BRIDGE_TOKEN": "bridge",
	"ANTHROPIC_API_KEY":      "sk-ant",
	"PATH":                   "/usr/local/bin:/usr/bin:/bin",
	"HOME":                   "/home/agent",
	"LC_ALL":                 "C.UTF-8",
	"STANDIN_TRANSCRIPT":     "/t.jsonl",
}

func TestEnvRule(t *testing.T) {
	tests := []struct {
		name        string
		rule        EnvRule
		wantKept    []string
		wantDropped []string
	}{{
		name: "claude adapter keys, no allow list",
		rule: EnvRule{AdapterKeys: []string{"ANTHROPIC_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN"}},
		wantKept: []string{"ANTHROPIC_API_KEY", "HOME", "LC_ALL", "PAPERCLIP_AGENT_ID", "PAPERCLIP_API_KEY", "PAPERCLIP_API_URL",
			"PAPERCLIP_BRIDGE_TOKEN", "PAPERCLIP_RUN_ID", "PAPERCLIP_WAKE_REASON", "PATH"},
		wantDropped: []string{"BETTER_AUTH_SECRET", "DATABASE_URL", "GITHUB_TOKEN", "HOSTNAME", "KUBERNETES_SERVICE_HOST",
			"MY_DB_PASSWORD", "NODE_OPTIONS", "PAPERCLIP_AGENT_JWT_SECRET", "PAPERCLIP_DEPLOYMENT_MODE", "PAPERCLIP_HOME",
			"PAPERCLIP_PUBLIC_URL", "PAPERCLIP_SECRETS_MASTER_KEY_FILE", "STANDIN_TRANSCRIPT"},
	}, {
		name: "envAllow adds names and prefixes, never a server key by prefix",
		rule: EnvRule{Allow: []string{"GITHUB_TOKEN", "STANDIN_*", "PAPERCLIP_*", "DATABASE_*"}},
		wantKept: []string{"GITHUB_TOKEN", "HOME", "LC_ALL", "PAPERCLIP_AGENT_ID", "PAPERCLIP_API_KEY", "PAPERCLIP_API_URL",
			"PAPERCLIP_BRIDGE_TOKEN", "PAPERCLIP_RUN_ID", "PAPERCLIP_WAKE_REASON", "PATH", "STANDIN_TRANSCRIPT"},
		wantDropped: []string{"ANTHROPIC_API_KEY", "BETTER_AUTH_SECRET", "DATABASE_URL", "HOSTNAME", "KUBERNETES_SERVICE_HOST",
			"MY_DB_PASSWORD", "NODE_OPTIONS", "PAPERCLIP_AGENT_JWT_SECRET", "PAPERCLIP_DEPLOYMENT_MODE", "PAPERCLIP_HOME",
			"PAPERCLIP_PUBLIC_URL", "PAPERCLIP_SECRETS_MASTER_KEY_FILE"},
	}, {
		name: "an exact name overrides the deny list",
		rule: EnvRule{Allow: []string{"MY_DB_PASSWORD"}},
		wantKept: []string{"HOME", "LC_ALL", "MY_DB_PASSWORD", "PAPERCLIP_AGENT_ID", "PAPERCLIP_API_KEY", "PAPERCLIP_API_URL",
			"PAPERCLIP_BRIDGE_TOKEN", "PAPERCLIP_RUN_ID", "PAPERCLIP_WAKE_REASON", "PATH"},
		wantDropped: []string{"ANTHROPIC_API_KEY", "BETTER_AUTH_SECRET", "DATABASE_URL", "GITHUB_TOKEN", "HOSTNAME",
			"KUBERNETES_SERVICE_HOST", "NODE_OPTIONS", "PAPERCLIP_AGENT_JWT_SECRET", "PAPERCLIP_DEPLOYMENT_MODE",
			"PAPERCLIP_HOME", "PAPERCLIP_PUBLIC_URL", "PAPERCLIP_SECRETS_MASTER_KEY_FILE", "STANDIN_TRANSCRIPT"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kept, dropped := tt.rule.Filter(serverEnv)
			var keys []string
			for k, v := range kept {
				if serverEnv[k] != v {
					t.Errorf("kept %s with another value", k)
				}
				keys = append(keys, k)
			}
			if diff := cmp.Diff(tt.wantKept, keys, cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
				t.Errorf("kept (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantDropped, dropped); diff != "" {
				t.Errorf("dropped (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseConfig(t *testing.T) {
	tests := []struct {
		name     string
		raw      map[string]any
		want     EnvironmentConfig
		wantErrs []string
	}{{
		name: "full",
		raw: map[string]any{"provider": "pcsync", "company": " acme ", "socketPath": "/spool/.pcsync/sandbox.sock",
			"image": "ghcr.io/x/claude:1", "leaseTtlSec": float64(600), "timeoutMs": float64(90000), "envAllow": []any{"GITHUB_TOKEN", "STANDIN_*"}, "prestart": false},
		want: EnvironmentConfig{Provider: "pcsync", Company: "acme", SocketPath: "/spool/.pcsync/sandbox.sock",
			Image: "ghcr.io/x/claude:1", LeaseTTLSec: 600, TimeoutMs: 90000, EnvAllow: []string{"GITHUB_TOKEN", "STANDIN_*"}, NoPrestart: true},
	}, {
		name: "prestart true is the default",
		raw:  map[string]any{"company": "acme", "prestart": true},
		want: EnvironmentConfig{Company: "acme"},
	}, {
		name: "every problem by field",
		raw: map[string]any{"provider": "kubernetes", "socketPath": "sandbox.sock", "leaseTtlSec": "600",
			"timeoutMs": float64(-1), "envAllow": []any{"OK", "no-dash", float64(3)}, "namespace": "x", "prestart": "no"},
		want: EnvironmentConfig{Provider: "kubernetes", SocketPath: "sandbox.sock", EnvAllow: []string{"OK"}},
		wantErrs: []string{
			`config.namespace: unknown field; known fields: provider, company, socketPath, image, leaseTtlSec, timeoutMs, envAllow, prestart`,
			`config.leaseTtlSec: want a positive whole number, got "600"`,
			`config.timeoutMs: want a positive whole number, got -1`,
			`config.envAllow[1]: want an environment variable name or PREFIX_*, got "no-dash"`,
			`config.envAllow[2]: want an environment variable name or PREFIX_*, got 3`,
			`config.prestart: want true or false, got "no"`,
			`config.provider: is "kubernetes"; this plugin serves provider "pcsync"`,
			`config.company: required: the pcsync Company (metadata.name) whose tenant namespace hosts this environment's pods`,
			`config.socketPath: "sandbox.sock" is not an absolute path`,
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, errs := ParseConfig(tt.raw)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("config (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantErrs, errorStrings(errs), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}
