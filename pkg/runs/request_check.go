package runs

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/pcsync/pcsync/internal/lib/redact"
	"github.com/pcsync/pcsync/pkg/config"
)

// Limits of a request's context, checked at admission. Each key becomes
// an environment variable of the agent (and, with the Kubernetes executor,
// an entry of the per-run Secret), so the limits keep an environment and a
// Secret well within what the kernel and the API server accept.
const (
	// MaxContextKeys is the most keys a context may have.
	MaxContextKeys = 64
	// MaxContextKeyLen is the longest a context key may be, in bytes.
	MaxContextKeyLen = 64
	// MaxContextValueBytes is the largest a context value may be, in
	// bytes (as its variable's value).
	MaxContextValueBytes = 16 << 10
	// MaxContextBytes is the most bytes the keys and values of a context
	// may take together.
	MaxContextBytes = 256 << 10
	// MaxPaperclipKeyBytes is the largest paperclip.apiKey accepted (a
	// Paperclip run JWT is about 500 bytes).
	MaxPaperclipKeyBytes = 16 << 10
	// maxPaperclipFieldBytes bounds paperclip.apiUrl, agentId and runId.
	maxPaperclipFieldBytes = 2048
)

// reservedContextEnv are variables a context key may not set: pcsync sets
// them from paperclip, and a context must not pass for credentials.
var reservedContextEnv = map[string]string{
	"PAPERCLIP_API_KEY": "paperclip.apiKey",
	"PAPERCLIP_API_URL": "paperclip.apiUrl",
}

// requestCompany resolves the request's company, by slug (company) or by
// Paperclip id (companyId): exactly one must be given. The message, when
// not empty, says what is wrong ("field: …").
func requestCompany(m *config.Model, req *config.RunRequest) (*config.Company, string) {
	switch {
	case req.Company != "" && req.CompanyID != "":
		return nil, "company, companyId: give one of them, not both: company (the slug) or companyId (the Paperclip company id)"
	case req.Company == "" && req.CompanyID == "":
		return nil, "company: field is required: give the company's slug (company) or its Paperclip id (companyId)"
	case req.CompanyID != "":
		if co, ok := m.CompanyByID(req.CompanyID); ok {
			return co, ""
		}
		return nil, fmt.Sprintf("companyId: no company of the config has spec.id %q (companies: %s); set the Paperclip company id as spec.id of the Company that serves it",
			truncate(req.CompanyID, 100), companyList(m))
	}
	if co, ok := m.Company(req.Company); ok {
		return co, ""
	}
	return nil, fmt.Sprintf("company: company %q is not in the config (companies: %s)", req.Company, companyList(m))
}

// checkContext applies the context limits. It returns one line per
// problem ("context.key: …"), none for a valid context. Values are never
// quoted.
func checkContext(ctx map[string]any) []string {
	if len(ctx) == 0 {
		return nil
	}
	var out []string
	if len(ctx) > MaxContextKeys {
		out = append(out, fmt.Sprintf("context: %d keys, more than the %d allowed", len(ctx), MaxContextKeys))
	}
	total := 0
	envOf := map[string]string{}
	for _, k := range slices.Sorted(maps.Keys(ctx)) {
		v := ContextValue(ctx[k])
		total += len(k) + len(v)
		field := "context." + truncate(k, MaxContextKeyLen)
		if len(k) > MaxContextKeyLen {
			out = append(out, fmt.Sprintf("%s: key is %d bytes long, more than the %d allowed", field, len(k), MaxContextKeyLen))
			continue
		}
		env := ContextEnvName(k)
		if f, ok := reservedContextEnv[env]; ok {
			out = append(out, fmt.Sprintf("%s: would set %s, which pcsync sets from %s; send it there", field, env, f))
			continue
		}
		if first, ok := envOf[env]; ok {
			out = append(out, fmt.Sprintf("%s: becomes %s, as context.%s does; keep one of them", field, env, first))
			continue
		}
		envOf[env] = k
		switch {
		case len(v) > MaxContextValueBytes:
			out = append(out, fmt.Sprintf("%s: value is %d bytes, more than the %s (%d bytes) allowed", field, len(v), sizeString(MaxContextValueBytes), MaxContextValueBytes))
		case strings.IndexByte(v, 0) >= 0:
			out = append(out, field+": value holds a NUL byte, which an environment variable cannot carry")
		case !utf8.ValidString(v):
			out = append(out, field+": value is not valid UTF-8")
		}
	}
	if total > MaxContextBytes {
		out = append(out, fmt.Sprintf("context: keys and values take %d bytes, more than the %s (%d bytes) allowed", total, sizeString(MaxContextBytes), MaxContextBytes))
	}
	return out
}

// checkPaperclip checks the call-back credentials. The key is never
// quoted.
func checkPaperclip(p *config.PaperclipCallback) []string {
	if p == nil {
		return nil
	}
	var out []string
	key := p.APIKey.Reveal()
	switch {
	case len(key) > MaxPaperclipKeyBytes:
		out = append(out, fmt.Sprintf("paperclip.apiKey: %d bytes, more than the %s (%d bytes) allowed; a Paperclip run JWT is about 500 bytes",
			len(key), sizeString(MaxPaperclipKeyBytes), MaxPaperclipKeyBytes))
	case strings.ContainsFunc(key, isControl):
		out = append(out, "paperclip.apiKey: holds a control character (NUL, line break, …); a Paperclip run JWT has none")
	}
	for _, f := range []struct{ name, v string }{{"apiUrl", p.APIURL}, {"agentId", p.AgentID}, {"runId", p.RunID}} {
		switch {
		case len(f.v) > maxPaperclipFieldBytes:
			out = append(out, fmt.Sprintf("paperclip.%s: %d bytes, more than the %d allowed", f.name, len(f.v), maxPaperclipFieldBytes))
		case strings.ContainsFunc(f.v, isControl):
			out = append(out, fmt.Sprintf("paperclip.%s: %q holds a control character", f.name, truncate(f.v, 100)))
		}
	}
	return out
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f }

// redactRequestKey removes the request's paperclip.apiKey from a
// rejection message. The key comes from the request as parsed, or, for a
// JSON request that did not validate, from a plain decode of it.
func redactRequestKey(msg string, req *config.RunRequest, data []byte) string {
	var key string
	if req != nil && req.Paperclip != nil {
		key = req.Paperclip.APIKey.Reveal()
	} else {
		var raw struct {
			Paperclip struct {
				APIKey any `json:"apiKey"`
			} `json:"paperclip"`
		}
		if json.Unmarshal(data, &raw) == nil {
			if s, ok := raw.Paperclip.APIKey.(string); ok {
				key = s
			}
		}
	}
	if len(key) < redact.MinLen {
		return msg
	}
	// The value only: the shapes of redact.String would take "apiKey:
	// expected string" for a key.
	return strings.ReplaceAll(msg, key, redact.Marker)
}

// truncate shortens s to at most n bytes (on a rune boundary), marking a
// cut with "…".
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
