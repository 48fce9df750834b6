package adapters

import (
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Base-URL env keys per provider: each is forwarded, and the host of its
// value is allowed as egress.
const (
	envAnthropicBaseURL = "ANTHROPIC_BASE_URL"
	envOpenAIBaseURL    = "OPENAI_BASE_URL"
	envGeminiBaseURL    = "GOOGLE_GEMINI_BASE_URL"
	envBedrockBaseURL   = "ANTHROPIC_BEDROCK_BASE_URL"
	envUseBedrock       = "CLAUDE_CODE_USE_BEDROCK"
)

// bedrockEnvKeys are forwarded when Claude Code runs against Amazon Bedrock:
// the region, every way the AWS SDK takes credentials from the environment,
// and Claude Code's own Bedrock settings.
var bedrockEnvKeys = []string{
	"ANTHROPIC_BEDROCK_BASE_URL",
	"ANTHROPIC_SMALL_FAST_MODEL_AWS_REGION",
	"AWS_ACCESS_KEY_ID",
	"AWS_BEARER_TOKEN_BEDROCK",
	"AWS_DEFAULT_REGION",
	"AWS_PROFILE",
	"AWS_REGION",
	"AWS_SECRET_ACCESS_KEY",
	"AWS_SESSION_TOKEN",
	"CLAUDE_CODE_SKIP_BEDROCK_AUTH",
	"CLAUDE_CODE_USE_BEDROCK",
}

var (
	awsRegionPattern = regexp.MustCompile(`^[a-z]{2}(-[a-z]+)+-[0-9]{1,2}$`)
	dnsLabelPattern  = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)
)

// envRules is the env-driven part of an adapter's environment and egress.
type envRules struct {
	baseURLKeys []string // forwarded; their values' hosts are egress
	bedrock     bool     // honours CLAUDE_CODE_USE_BEDROCK
}

func (r envRules) forwardKeys(env map[string]string) []string {
	keys := append([]string(nil), r.baseURLKeys...)
	if r.bedrock && truthy(env[envUseBedrock]) {
		keys = append(keys, bedrockEnvKeys...)
	}
	return sortedUnique(keys)
}

func (r envRules) egressHosts(env map[string]string) []string {
	var hosts []string
	for _, k := range r.baseURLKeys {
		if h := hostOf(env[k]); h != "" {
			hosts = append(hosts, h)
		}
	}
	if r.bedrock && truthy(env[envUseBedrock]) {
		hosts = append(hosts, bedrockHosts(env)...)
	}
	return sortedUnique(hosts)
}

// bedrockHosts are the regional endpoints Claude Code uses on Bedrock: the
// runtime (inference), the control plane (inference-profile look-ups) and
// STS (web-identity credentials, e.g. IRSA). With no valid region in
// AWS_REGION or AWS_DEFAULT_REGION only a custom Bedrock base URL counts.
func bedrockHosts(env map[string]string) []string {
	var hosts []string
	regions := []string{firstNonEmpty(env["AWS_REGION"], env["AWS_DEFAULT_REGION"]), env["ANTHROPIC_SMALL_FAST_MODEL_AWS_REGION"]}
	for _, r := range regions {
		r = strings.ToLower(strings.TrimSpace(r))
		if !awsRegionPattern.MatchString(r) {
			continue
		}
		hosts = append(hosts,
			"bedrock-runtime."+r+".amazonaws.com",
			"bedrock."+r+".amazonaws.com",
			"sts."+r+".amazonaws.com")
	}
	if h := hostOf(env[envBedrockBaseURL]); h != "" {
		hosts = append(hosts, h)
	}
	return hosts
}

// hostOf returns the lower-case DNS name in a base URL ("https://h:8443/v1"
// or "h:8443"), or "" when there is none, it is an IP address, or it is not
// a valid host name.
func hostOf(raw string) string {
	raw = strings.TrimSpace(raw)
	if raw == "" {
		return ""
	}
	if !strings.Contains(raw, "://") {
		raw = "https://" + raw
	}
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	h := strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
	if !validHostname(h) {
		return ""
	}
	return h
}

// validHostname reports whether h is an RFC 1123 host name and not an IPv4
// address (IP addresses belong in allowCidrs).
func validHostname(h string) bool {
	if h == "" || len(h) > 253 {
		return false
	}
	labels := strings.Split(h, ".")
	for _, l := range labels {
		if !dnsLabelPattern.MatchString(l) {
			return false
		}
	}
	last := labels[len(labels)-1]
	return strings.Trim(last, "0123456789") != ""
}

func truthy(v string) bool {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "1", "true", "yes", "on":
		return true
	}
	return false
}

func firstNonEmpty(vs ...string) string {
	for _, v := range vs {
		if strings.TrimSpace(v) != "" {
			return v
		}
	}
	return ""
}

func sortedUnique(ss []string) []string {
	if len(ss) == 0 {
		return nil
	}
	out := append([]string(nil), ss...)
	sort.Strings(out)
	w := 1
	for i := 1; i < len(out); i++ {
		if out[i] != out[w-1] {
			out[w] = out[i]
			w++
		}
	}
	return out[:w]
}

// EgressHostsFor returns the egress hosts that adapter type t needs beyond
// its configured allowFqdns for an agent with env (see Adapter.EgressHosts):
// sorted, deduplicated, valid host names only.
func EgressHostsFor(t Type, env map[string]string) ([]string, error) {
	a, err := Get(t)
	if err != nil {
		return nil, err
	}
	return a.EgressHosts(env), nil
}

// ForwardEnvKeysFor returns the env keys that adapter type t forwards beyond
// its configured envKeys for an agent with env (see Adapter.ForwardEnvKeys).
func ForwardEnvKeysFor(t Type, env map[string]string) ([]string, error) {
	a, err := Get(t)
	if err != nil {
		return nil, err
	}
	return a.ForwardEnvKeys(env), nil
}

// EgressPortsFor returns the ports other than 443 that the base URLs in an
// agent's env name (an explicit port, or 80 for an http:// URL without
// one), for the hosts EgressHostsFor returns; sorted, deduplicated.
func EgressPortsFor(t Type, env map[string]string) ([]int, error) {
	a, err := Get(t)
	if err != nil {
		return nil, err
	}
	var ports []int
	for _, k := range a.ForwardEnvKeys(env) {
		if p := portOf(env[k]); p != 0 && p != 443 {
			ports = append(ports, p)
		}
	}
	sort.Ints(ports)
	return slices.Compact(ports), nil
}

// portOf is the port of a base URL whose host hostOf accepts: its
// explicit port, else 80 for http and 443 for https; 0 when raw is no such
// URL.
func portOf(raw string) int {
	if hostOf(raw) == "" {
		return 0
	}
	raw = strings.TrimSpace(raw)
	if !strings.Contains(raw, "://") {
		raw = "https://" + raw
	}
	u, err := url.Parse(raw)
	if err != nil {
		return 0
	}
	if p, err := strconv.Atoi(u.Port()); err == nil && p > 0 && p < 65536 {
		return p
	}
	switch strings.ToLower(u.Scheme) {
	case "http":
		return 80
	case "https":
		return 443
	}
	return 0
}
