package render

import (
	"net/netip"
	"net/url"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/pcsync/pcsync/pkg/config"
)

// baseURLKeys are env keys whose value is a custom API endpoint: its host
// must be reachable.
var baseURLKeys = []string{"ANTHROPIC_BASE_URL", "OPENAI_BASE_URL", "GOOGLE_GEMINI_BASE_URL"}

// envEgressHosts are the hosts an agent's env implies: the host of a custom
// base URL, and Bedrock's runtime endpoint when Claude Code runs on Bedrock.
//
// TODO(lead): pkg/adapters owns this knowledge per adapter type
// (adapters.Get(adapters.Type(t)).EgressHosts(env)); switch to it once it
// has landed, and re-run `go test ./pkg/render -update`.
func envEgressHosts(_ config.AdapterType, env map[string]string) []string {
	var hosts []string
	for _, k := range baseURLKeys {
		if h := hostOf(env[k]); h != "" {
			hosts = append(hosts, h)
		}
	}
	if use, _ := strconv.ParseBool(env["CLAUDE_CODE_USE_BEDROCK"]); use {
		if r := env["AWS_REGION"]; r != "" && len(validation.IsDNS1123Label(r)) == 0 {
			hosts = append(hosts, "bedrock-runtime."+r+".amazonaws.com")
		}
	}
	return hosts
}

// hostOf is the host name of a URL, or "" when there is none or it is an
// IP address (allow those with allowCidrs).
func hostOf(raw string) string {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil {
		return ""
	}
	h := strings.ToLower(u.Hostname())
	if h == "" {
		return ""
	}
	if _, err := netip.ParseAddr(h); err == nil {
		return ""
	}
	if len(validation.IsDNS1123Subdomain(h)) > 0 {
		return ""
	}
	return h
}
