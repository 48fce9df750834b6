package runs

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"unicode"
)

// basicEnvKeys are the only variables of the daemon's own environment that
// reach a local agent without being asked for.
var basicEnvKeys = []string{"PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ"}

// EnvSpec is what an agent's environment is made of, lowest precedence
// first. Both executors build the agent's environment from one: the local
// executor as the process's environment, the Kubernetes executor as the
// container's (its Secret holding the secret values).
type EnvSpec struct {
	// Basic are the daemon's basic variables (PATH, LANG, LC_ALL,
	// LC_CTYPE, TZ; see BasicEnv), which the local executor passes on.
	Basic map[string]string
	// Forwarded are the values of the adapter's env keys found in the
	// daemon's environment (see ForwardedEnv). They are secret.
	Forwarded map[string]string
	// Agent is the agent's env from the config.
	Agent map[string]string
	// Adapter is the environment the adapter's command line asks for.
	Adapter map[string]string
	// Home is the agent's HOME.
	Home string
	// Proxy are the egress proxy's variables (HTTPS_PROXY, NO_PROXY, ...)
	// of a company in egress mode proxy; they win over the agent's and the
	// adapter's env. None of them is secret.
	Proxy map[string]string
	// Context is the request's Paperclip wake context; each key becomes
	// PAPERCLIP_<KEY> (see ContextEnvName, ContextValue). It is secret.
	Context map[string]any
	// RunID, CompanyID and AgentID become PAPERCLIP_RUN_ID,
	// PAPERCLIP_COMPANY_ID and PAPERCLIP_AGENT_ID.
	RunID, CompanyID, AgentID string
	// APIURL and APIKey become PAPERCLIP_API_URL and PAPERCLIP_API_KEY
	// when not empty. APIKey is the run's JWT, a secret.
	APIURL, APIKey string
}

// EnvVar is one variable of an agent's environment.
type EnvVar struct {
	Name, Value string
	// Secret is set for a value taken from the daemon's environment (a
	// forwarded key), the wake context or the run's JWT: the Kubernetes
	// executor keeps it in the run's Secret, never in the Job.
	Secret bool
}

// Vars returns the environment sorted by name. A variable set by several
// sources takes the value of the last: the basics, the forwarded keys, the
// agent's env, the adapter's env, HOME, the proxy's variables, the wake
// context, then
// PAPERCLIP_RUN_ID, PAPERCLIP_COMPANY_ID, PAPERCLIP_AGENT_ID,
// PAPERCLIP_API_URL and PAPERCLIP_API_KEY. Nothing else of the daemon's
// environment gets in.
func (s EnvSpec) Vars() []EnvVar {
	env := map[string]EnvVar{}
	put := func(name, value string, secret bool) { env[name] = EnvVar{Name: name, Value: value, Secret: secret} }
	for k, v := range s.Basic {
		put(k, v, false)
	}
	for k, v := range s.Forwarded {
		put(k, v, true)
	}
	for k, v := range s.Agent {
		put(k, v, false)
	}
	for k, v := range s.Adapter {
		put(k, v, false)
	}
	if s.Home != "" {
		put("HOME", s.Home, false)
	}
	for k, v := range s.Proxy {
		put(k, v, false)
	}
	for k, v := range s.Context {
		put(ContextEnvName(k), ContextValue(v), true)
	}
	put("PAPERCLIP_RUN_ID", s.RunID, false)
	put("PAPERCLIP_COMPANY_ID", s.CompanyID, false)
	put("PAPERCLIP_AGENT_ID", s.AgentID, false)
	if s.APIURL != "" {
		put("PAPERCLIP_API_URL", s.APIURL, false)
	}
	if s.APIKey != "" {
		put("PAPERCLIP_API_KEY", s.APIKey, true)
	}
	out := make([]EnvVar, 0, len(env))
	for _, k := range slices.Sorted(maps.Keys(env)) {
		out = append(out, env[k])
	}
	return out
}

// Build returns the environment (Vars) as sorted KEY=VALUE lines.
func (s EnvSpec) Build() []string {
	vars := s.Vars()
	out := make([]string, len(vars))
	for i, v := range vars {
		out[i] = v.Name + "=" + v.Value
	}
	return out
}

// EnvMap turns KEY=VALUE lines (os.Environ) into a map.
func EnvMap(lines []string) map[string]string {
	m := make(map[string]string, len(lines))
	for _, kv := range lines {
		if k, v, ok := strings.Cut(kv, "="); ok {
			m[k] = v
		}
	}
	return m
}

// BasicEnv returns the basic variables (PATH, LANG, LC_ALL, LC_CTYPE, TZ)
// found in the daemon's environment.
func BasicEnv(daemon map[string]string) map[string]string {
	out := map[string]string{}
	for _, k := range basicEnvKeys {
		if v, ok := daemon[k]; ok {
			out[k] = v
		}
	}
	return out
}

// ForwardedEnv returns the values, found in the daemon's environment, of
// the keys r's agent gets from it: the adapter's configured envKeys, and the
// keys the adapter asks for given those values and the agent's env (AWS
// keys when CLAUDE_CODE_USE_BEDROCK is set, …). The values are secret.
func ForwardedEnv(r *Run, daemon map[string]string) map[string]string {
	keys := r.Model.Adapter(r.Agent.Adapter).EnvKeys
	seen := map[string]string{}
	for _, k := range keys {
		if v, ok := daemon[k]; ok {
			seen[k] = v
		}
	}
	maps.Copy(seen, r.Agent.Env)
	out := map[string]string{}
	for _, k := range slices.Concat(keys, r.Adapter.ForwardEnvKeys(seen)) {
		if v, ok := daemon[k]; ok {
			out[k] = v
		}
	}
	return out
}

// ContextEnvName maps a wake-context key to its variable: taskId →
// PAPERCLIP_TASK_ID, wakeReason → PAPERCLIP_WAKE_REASON, issue_url →
// PAPERCLIP_ISSUE_URL.
func ContextEnvName(key string) string {
	var b strings.Builder
	b.WriteString("PAPERCLIP_")
	rs := []rune(key)
	for i, r := range rs {
		if unicode.IsUpper(r) && i > 0 {
			prev := rs[i-1]
			nextLower := i+1 < len(rs) && unicode.IsLower(rs[i+1])
			if unicode.IsLower(prev) || unicode.IsDigit(prev) || (unicode.IsUpper(prev) && nextLower) {
				b.WriteByte('_')
			}
		}
		b.WriteRune(unicode.ToUpper(r))
	}
	return b.String()
}

// ContextValue renders a context value (string, number or bool) as the
// variable's value; numbers never use exponent notation.
func ContextValue(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case bool:
		return strconv.FormatBool(x)
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	case float32:
		return strconv.FormatFloat(float64(x), 'f', -1, 32)
	case int:
		return strconv.Itoa(x)
	case int64:
		return strconv.FormatInt(x, 10)
	case fmt.Stringer:
		return x.String()
	default:
		return fmt.Sprint(x)
	}
}
