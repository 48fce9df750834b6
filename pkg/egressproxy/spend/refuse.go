package spend

import (
	"encoding/json"
	"net/http"

	"github.com/pcsync/pcsync/pkg/adapters"
)

// refusalStatus is a refusal's HTTP status: 403, which the CLIs print and
// do not retry (Claude Code and Codex retry a 429 for minutes; Codex
// prints its own words for an insufficient_quota, not the message).
const refusalStatus = http.StatusForbidden

// refusalBody is msg as p's API words a refused request.
func refusalBody(p adapters.Provider, msg string) []byte {
	var v any
	switch p {
	case adapters.ProviderAnthropic:
		v = map[string]any{"type": "error", "error": map[string]any{"type": "permission_error", "message": msg}}
	case adapters.ProviderGemini:
		v = map[string]any{"error": map[string]any{"code": refusalStatus, "message": msg, "status": "PERMISSION_DENIED"}}
	default:
		v = map[string]any{"error": map[string]any{"message": msg, "type": "invalid_request_error", "code": "budget_exceeded"}}
	}
	b, _ := json.Marshal(v)
	return b
}
