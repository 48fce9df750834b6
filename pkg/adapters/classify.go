package adapters

import (
	"encoding/json"
	"regexp"
	"strings"

	"github.com/pcsync/pcsync/pkg/result"
)

// classRule maps error texts to an error code. Rules are tried in order, the
// most specific first: "No conversation found" is a session problem even
// though it also says "not found", and a quota message may mention 429.
type classRule struct {
	code result.ErrorCode
	re   *regexp.Regexp
}

// classRules apply to error texts only (a result's error, a failed turn's
// message, stderr), never to a whole stream: bare numbers like 429 would
// match token counts there.
var classRules = []classRule{
	// pcsync's egress proxy's refusal (package spend) names a budget and
	// says "budget spent": before auth (it is a 403) and quota.
	{result.ErrBudgetExceeded, regexp.MustCompile(`pcsync: budget spent`)},
	{result.ErrSessionNotFound, regexp.MustCompile(`(?i)no conversation found|no rollout found|session not found|no session found|no session (?:found )?matching|invalid session identifier|error resuming session|(?:thread|session|chat) [^\s]* ?(?:was )?not found|unknown session|NO_SESSION`)},
	{result.ErrMaxTurns, regexp.MustCompile(`(?i)max(?:imum)?[ _-]?(?:number of )?(?:session )?turns|turn[ _-]?limit|FatalTurnLimitedError|max_turn_requests|error_max_turns`)},
	{result.ErrModelNotFound, regexp.MustCompile(`(?i)issue with the selected model|model[ _-]?not[ _-]?found|ModelNotFound|unknown model|invalid model|model .{0,80}(?:does not exist|not exist|is not supported|not available|not found)|no such model|not_found_error.{0,40}model|model_not_found`)},
	{result.ErrAuthRequired, regexp.MustCompile(`(?i)not logged in|please run /login|invalid api key|incorrect api key|invalid x-api-key|failed to authenticate|authentication[ _](?:failed|required|error)|authentication_error|unauthori[sz]ed|\b401\b|oauth .{0,40}expired|token (?:has )?expired|refresh_token|no api key|api key (?:is )?(?:missing|not (?:set|found|valid))|missing api key|set an auth method|FatalAuthenticationError|ProviderAuthError|login required|\bauth(?:entication)? required|permission_denied.{0,40}api key|\b403\b.{0,40}(?:key|auth|credential)`)},
	// A per-minute "quota" (Gemini's RESOURCE_EXHAUSTED for requests per
	// minute) is a rate limit: it clears in a minute.
	{result.ErrRateLimited, regexp.MustCompile(`(?i)per[ _-]?minute|PerMinute|\bRPM\b|\bTPM\b`)},
	{result.ErrQuotaExceeded, regexp.MustCompile(`(?i)out of (?:extra )?usage|usage limit|5-hour limit|weekly limit|monthly limit|spend(?:ing)? limit|quota|RESOURCE_EXHAUSTED|insufficient_quota|credit balance|billing|budget (?:exhausted|exceeded)|exceeded your current|usage_limit_reached|error_max_budget_usd|payment required|\b402\b`)},
	{result.ErrRateLimited, regexp.MustCompile(`(?i)rate[ _-]?limit|too many requests|\b429\b|throttl`)},
	{result.ErrUpstreamUnavailable, regexp.MustCompile(`(?i)overloaded|\b529\b|\b50[0234]\b|service unavailable|bad gateway|gateway time-?out|internal server error|unable to connect|connection (?:error|refused|reset|failed|closed)|EAI_AGAIN|ECONNRESET|ECONNREFUSED|ETIMEDOUT|ENOTFOUND|ENETUNREACH|stream disconnected|fetch failed|network error|waiting for network|name does not resolve|failed to lookup address|at capacity|high demand|upstream (?:error|connect|unavailable)|server_error|api_error|socket hang up|timed out|timeout`)},
}

// classifyText returns the code of the first rule that matches any of texts.
func classifyText(texts ...string) (result.ErrorCode, bool) {
	for _, r := range classRules {
		for _, t := range texts {
			if t != "" && r.re.MatchString(t) {
				return r.code, true
			}
		}
	}
	return "", false
}

// stderrNoise are lines CLIs print on stderr on every run; they never
// explain a failure.
var stderrNoise = regexp.MustCompile(`(?i)^(?:YOLO mode is enabled|Approval mode overridden|Warning: (?:256-color|Basic terminal)|Ripgrep is not available|Loaded cached credentials|WARNING: proceeding, even though we could not create PATH aliases|Stack backtrace:|Reading additional input from stdin|Skill ".*" from ".*" is overriding)`)

var (
	stackLine     = regexp.MustCompile(`^\s*(?:at\s|\d+:\s|<unknown>|\.\.\. \d+ more|File ")`)
	telltaleLine  = regexp.MustCompile(`(?i)error|fail|fatal|denied|not found|invalid|unauthori|forbidden|quota|limit|please|must|cannot|can't|unable|expired|exhausted`)
	logPrefixLine = regexp.MustCompile(`^\d{4}-\d\d-\d\dT[0-9:.]+Z?\s+`)
)

// stderrDigest picks the lines of a stderr tail that explain a failure: the
// last two that look like errors, else the last two lines, without noise,
// stack frames or ANSI colour.
func stderrDigest(stderr string) string {
	var lines, telling []string
	for _, l := range strings.Split(stripANSI(stderr), "\n") {
		l = jsonErrorText(strings.TrimSpace(l))
		if l == "" || stderrNoise.MatchString(l) || stackLine.MatchString(l) {
			continue
		}
		lines = append(lines, l)
		if telltaleLine.MatchString(logPrefixLine.ReplaceAllString(l, "")) {
			telling = append(telling, l)
		}
	}
	pick := lines
	if len(telling) > 0 {
		pick = telling
	}
	if len(pick) > 2 {
		pick = pick[len(pick)-2:]
	}
	return strings.Join(pick, "; ")
}

// jsonErrorText turns a JSON error line on stderr (acpx prints JSON-RPC
// errors there) into its message, with acpx's code when present; other
// lines are returned as they are.
func jsonErrorText(l string) string {
	if !strings.HasPrefix(l, "{") {
		return l
	}
	var m struct {
		Message string `json:"message"`
		Error   *struct {
			Message string `json:"message"`
			Data    struct {
				AcpxCode string `json:"acpxCode"`
			} `json:"data"`
		} `json:"error"`
	}
	if json.Unmarshal([]byte(l), &m) != nil {
		return l
	}
	if m.Error != nil && m.Error.Message != "" {
		if m.Error.Data.AcpxCode != "" {
			return m.Error.Message + " (" + m.Error.Data.AcpxCode + ")"
		}
		return m.Error.Message
	}
	if m.Message != "" {
		return m.Message
	}
	return l
}
