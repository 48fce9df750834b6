package sandbox

import (
	"slices"
	"sort"
	"strings"
)

// EnvRule decides which keys of an execute's env reach the lease pod.
//
// Paperclip hands some executes (the adapters' install-detect probes) the
// server's whole process environment, among it the key that signs every
// agent JWT (PAPERCLIP_AGENT_JWT_SECRET) and the secrets master key. A
// provider that passed them on would put the instance's keys into a tenant
// pod. So the rule is allow-by-name, deny the rest:
//
//  1. Denied always, whatever else says: the Paperclip server's own
//     configuration (ServerKeys) and any name that holds SECRET, PASSWORD,
//     PASSWD, PRIVATE_KEY, MASTER_KEY or DATABASE_URL, unless an adapter
//     key or EnvAllow names it exactly.
//  2. Allowed: the process identity and locale keys (PATH, HOME, TMPDIR,
//     LANG, LC_*, TZ, TERM, XDG_*, …); the keys the stock adapters set for
//     their CLI (AGENT_HOME, CLAUDE_CONFIG_DIR, CODEX_HOME, …); every other PAPERCLIP_* key (the
//     run's own: its JWT PAPERCLIP_API_KEY, PAPERCLIP_API_URL, run, agent,
//     task, wake and bridge keys); the lease's adapter keys (pkg/adapters'
//     EnvKeys of its type, e.g. ANTHROPIC_API_KEY, with Settings
//     spec.adapters overrides); the environment config's envAllow.
//  3. Everything else is dropped; its name (never its value) is reported so
//     that an operator can allow it.
type EnvRule struct {
	// AdapterKeys are the env keys the lease's adapter type needs.
	AdapterKeys []string
	// Allow are further names or PREFIX_* patterns (envAllow).
	Allow []string
}

// ServerKeys are configuration keys of the Paperclip server process (its
// secrets, database, storage, auth and deployment settings) that never reach
// a sandbox.
var ServerKeys = []string{
	"PAPERCLIP_AGENT_JWT_SECRET", "PAPERCLIP_AGENT_JWT_ISSUER", "PAPERCLIP_AGENT_JWT_AUDIENCE",
	"PAPERCLIP_AGENT_JWT_TTL_SECONDS", "PAPERCLIP_AGENT_JWT_DISABLE_LEGACY_FALLBACK",
	"PAPERCLIP_SECRETS_*", "PAPERCLIP_HOME", "PAPERCLIP_INSTANCE_ID", "PAPERCLIP_CONFIG",
	"PAPERCLIP_MANAGED_CONFIG", "PAPERCLIP_DEPLOYMENT_*", "PAPERCLIP_PUBLIC_URL",
	"PAPERCLIP_AUTH_*", "PAPERCLIP_STORAGE_*", "PAPERCLIP_DB_*", "PAPERCLIP_TEST_DATABASE_URL",
	"PAPERCLIP_TOOL_ACTION_SIGNING_SECRET", "PAPERCLIP_TOOL_OAUTH_*", "PAPERCLIP_DECISION_SIGNING_SECRET",
	"PAPERCLIP_CLOUD_TENANT_SERVER_TOKEN", "PAPERCLIP_TELEMETRY_*", "PAPERCLIP_FEEDBACK_EXPORT_*",
	"PAPERCLIP_DEV_SERVER_STATUS_TOKEN", "PAPERCLIP_LISTEN_*", "PAPERCLIP_BIND*",
	"PAPERCLIP_ALLOWED_HOSTNAMES", "PAPERCLIP_TAILSCALE_*", "PAPERCLIP_TAILNET_*",
	"PAPERCLIP_MCP_GATEWAY_*", "PAPERCLIP_EMBEDDED_POSTGRES_*", "PAPERCLIP_MIGRATION_*",
	"PAPERCLIP_UPDATE_CHECK", "PAPERCLIP_OPEN_ON_LISTEN", "PAPERCLIP_ENABLE_COMPANY_DELETION",
	"PAPERCLIP_RUNNER_STATE_DIR", "PAPERCLIP_WORKTREES_DIR",
	"DATABASE_URL", "BETTER_AUTH_*", "KUBERNETES_*",
}

// identityKeys describe the process (its sandbox's, once Paperclip has
// removed the host's own values).
var identityKeys = []string{
	"PATH", "HOME", "PWD", "SHELL", "USER", "LOGNAME", "TMPDIR", "TMP", "TEMP", "TZ",
	"TERM", "COLORTERM", "NO_COLOR", "FORCE_COLOR", "LANG", "LANGUAGE", "LC_*", "XDG_*", "CI",
}

// stockAdapterKeys are the keys Paperclip's stock adapters set for their
// CLI (config and home directories, switches); they describe the run, not
// the server.
var stockAdapterKeys = []string{
	"AGENT_HOME", "CLAUDE_CONFIG_DIR", "CLAUDE_CODE_USE_BEDROCK", "CODEX_HOME", "GEMINI_CLI_TRUST_WORKSPACE",
	"OPENCODE_DISABLE_PROJECT_CONFIG", "PI_CODING_AGENT_DIR", "GROK_HOME", "KIMI_MODEL_THINKING_EFFORT",
}

var secretWords = []string{"SECRET", "PASSWORD", "PASSWD", "PRIVATE_KEY", "MASTER_KEY", "DATABASE_URL"}

// Filter returns the part of env that may reach the pod and the sorted
// names of the keys it dropped.
func (r EnvRule) Filter(env map[string]string) (kept map[string]string, dropped []string) {
	kept = make(map[string]string, len(env))
	for k, v := range env {
		if r.Allowed(k) {
			kept[k] = v
		} else {
			dropped = append(dropped, k)
		}
	}
	sort.Strings(dropped)
	return kept, dropped
}

// Allowed reports whether the key may reach the pod.
func (r EnvRule) Allowed(key string) bool {
	explicit := slices.Contains(r.AdapterKeys, key) || slices.Contains(r.Allow, key)
	if explicit {
		return true
	}
	up := strings.ToUpper(key)
	if matchAny(ServerKeys, up) {
		return false
	}
	for _, w := range secretWords {
		if strings.Contains(up, w) {
			return false
		}
	}
	switch {
	case matchAny(identityKeys, up), matchAny(stockAdapterKeys, up):
		return true
	case strings.HasPrefix(up, "PAPERCLIP_"):
		return true
	case matchAny(r.Allow, key):
		return true
	}
	return false
}

// matchAny reports whether key equals a name or starts with a PREFIX* of
// patterns.
func matchAny(patterns []string, key string) bool {
	for _, p := range patterns {
		if prefix, ok := strings.CutSuffix(p, "*"); ok {
			if strings.HasPrefix(key, prefix) {
				return true
			}
		} else if key == p {
			return true
		}
	}
	return false
}
