package spend

import (
	"net/http"

	"github.com/pcsync/pcsync/pkg/adapters"
)

// refusalStatus is a refusal's HTTP status: 403, which the CLIs print and
// do not retry (Claude Code and Codex retry a 429 for minutes; Codex
// prints its own words for an insufficient_quota, not the message).
const refusalStatus = http.StatusForbidden

// refusal is how each provider's API names a request refused for budget.
var refusal = adapters.ErrorKind{AnthropicType: "permission_error", GeminiStatus: "PERMISSION_DENIED", OpenAICode: "budget_exceeded"}

// refusalBody is msg as p's API words a refused request.
func refusalBody(p adapters.Provider, msg string) []byte {
	return refusal.ErrorBody(p, refusalStatus, msg)
}
