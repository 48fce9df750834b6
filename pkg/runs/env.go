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
// reach an agent without being asked for.
var basicEnvKeys = []string{"PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ"}

// EnvSpec is what an agent process's environment is made of, lowest
// precedence first.
type EnvSpec struct {
	// Daemon is the daemon's environment, as KEY=VALUE lines.
	Daemon []string
	// Forward are the keys taken from Daemon besides the basics: the
	// adapter's effective envKeys and the adapter's extra keys.
	Forward []string
	// Agent is the agent's env from the config.
	Agent map[string]string
	// Adapter is the environment the adapter's command line asks for.
	Adapter map[string]string
	// Home is the agent's HOME.
	Home string
	// Context is the request's Paperclip wake context.
	Context map[string]any
	// RunID, CompanyID and AgentID become PAPERCLIP_RUN_ID,
	// PAPERCLIP_COMPANY_ID and PAPERCLIP_AGENT_ID.
	RunID, CompanyID, AgentID string
	// APIURL and APIKey become PAPERCLIP_API_URL and PAPERCLIP_API_KEY
	// when not empty. APIKey is the run's JWT, a secret.
	APIURL, APIKey string
}

// Build returns the environment as sorted KEY=VALUE lines. Nothing of the
// daemon's environment gets in except the basics and the forwarded keys.
func (s EnvSpec) Build() []string {
	daemon := make(map[string]string, len(s.Daemon))
	for _, kv := range s.Daemon {
		if k, v, ok := strings.Cut(kv, "="); ok {
			daemon[k] = v
		}
	}
	env := map[string]string{}
	for _, k := range append(slices.Clone(basicEnvKeys), s.Forward...) {
		if v, ok := daemon[k]; ok {
			env[k] = v
		}
	}
	maps.Copy(env, s.Agent)
	maps.Copy(env, s.Adapter)
	if s.Home != "" {
		env["HOME"] = s.Home
	}
	for k, v := range s.Context {
		env[ContextEnvName(k)] = ContextValue(v)
	}
	env["PAPERCLIP_RUN_ID"] = s.RunID
	env["PAPERCLIP_COMPANY_ID"] = s.CompanyID
	env["PAPERCLIP_AGENT_ID"] = s.AgentID
	if s.APIURL != "" {
		env["PAPERCLIP_API_URL"] = s.APIURL
	}
	if s.APIKey != "" {
		env["PAPERCLIP_API_KEY"] = s.APIKey
	}
	out := make([]string, 0, len(env))
	for _, k := range slices.Sorted(maps.Keys(env)) {
		out = append(out, k+"="+env[k])
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
	case fmt.Stringer:
		return x.String()
	default:
		return fmt.Sprint(x)
	}
}
