package adapters

import (
	"encoding/json"
	"slices"
)

// Provider names a model provider whose key a company's credential holds.
type Provider string

// The providers whose keys pcsync's egress proxy can inject.
const (
	ProviderAnthropic Provider = "anthropic"
	ProviderOpenAI    Provider = "openai"
	ProviderGemini    Provider = "gemini"
	// ProviderGitHub is no model provider: a GitHub token, for git over
	// HTTPS and GitHub's API, which any agent's tools may use. Routes has
	// no route for it (package inject serves it).
	ProviderGitHub Provider = "github"
	// ProviderHeader is no model provider either: a key set in a declared
	// header toward one base URL, for any agent's tools.
	ProviderHeader Provider = "header"
)

// ErrorKind is how each provider's API names one kind of error: its error
// type (Anthropic), its status (Gemini) and its code (OpenAI and the rest).
type ErrorKind struct{ AnthropicType, GeminiStatus, OpenAICode string }

// ErrorBody is msg as p's API words an error of kind k with HTTP status
// status, in the JSON its CLI parses and prints.
func (k ErrorKind) ErrorBody(p Provider, status int, msg string) []byte {
	var v any
	switch p {
	case ProviderAnthropic:
		v = map[string]any{"type": "error", "error": map[string]any{"type": k.AnthropicType, "message": msg}}
	case ProviderGemini:
		v = map[string]any{"error": map[string]any{"code": status, "message": msg, "status": k.GeminiStatus}}
	default:
		v = map[string]any{"error": map[string]any{"message": msg, "type": "invalid_request_error", "code": k.OpenAICode}}
	}
	b, _ := json.Marshal(v)
	return b
}

// KeyKind is what a credential's secret is: an API key, or an OAuth token
// (Anthropic only), which the provider takes in another header.
type KeyKind string

const (
	KeyAPIKey     KeyKind = "apiKey"
	KeyOAuthToken KeyKind = "oauthToken"
)

// Header is where a provider takes a key: the header's name, and the
// scheme before the key ("Bearer") when there is one.
type Header struct {
	Name   string `json:"name"`
	Scheme string `json:"scheme,omitempty"`
}

// Value is the header's value for key.
func (h Header) Value(key string) string {
	if h.Scheme == "" {
		return key
	}
	return h.Scheme + " " + key
}

// Route is how the CLIs reach a provider and authenticate to it: its API
// host, the variable that points a CLI at another base URL, the variables
// that carry a key (each CLI reads one of them), and the header each kind
// of key goes in.
type Route struct {
	Provider   Provider
	Host       string
	BaseURLEnv string
	// BasePath is the path of the API's base URL as the CLIs take it in
	// BaseURLEnv ("/v1" for OpenAI); their requests' paths follow it.
	BasePath string
	// KeyEnv are the variables a key of each kind is given in.
	KeyEnv map[KeyKind][]string
	// Headers are the headers a key of each kind is sent in.
	Headers map[KeyKind]Header
}

// Routes returns the route of every provider, in a new map on every call.
func Routes() map[Provider]Route {
	bearer := Header{Name: "Authorization", Scheme: "Bearer"}
	return map[Provider]Route{
		ProviderAnthropic: {
			Provider: ProviderAnthropic, Host: "api.anthropic.com", BaseURLEnv: envAnthropicBaseURL,
			KeyEnv: map[KeyKind][]string{
				KeyAPIKey:     {"ANTHROPIC_API_KEY"},
				KeyOAuthToken: {"CLAUDE_CODE_OAUTH_TOKEN", "ANTHROPIC_AUTH_TOKEN"},
			},
			Headers: map[KeyKind]Header{KeyAPIKey: {Name: "x-api-key"}, KeyOAuthToken: bearer},
		},
		ProviderOpenAI: {
			Provider: ProviderOpenAI, Host: "api.openai.com", BaseURLEnv: envOpenAIBaseURL, BasePath: "/v1",
			KeyEnv:  map[KeyKind][]string{KeyAPIKey: {"OPENAI_API_KEY", "CODEX_API_KEY"}},
			Headers: map[KeyKind]Header{KeyAPIKey: bearer},
		},
		ProviderGemini: {
			Provider: ProviderGemini, Host: "generativelanguage.googleapis.com", BaseURLEnv: envGeminiBaseURL,
			KeyEnv:  map[KeyKind][]string{KeyAPIKey: {"GEMINI_API_KEY", "GOOGLE_API_KEY"}},
			Headers: map[KeyKind]Header{KeyAPIKey: {Name: "x-goog-api-key"}},
		},
	}
}

// Providers returns the providers whose keys an adapter's CLI may use,
// sorted; none for a CLI that talks to its vendor's service only (Cursor).
func Providers(t Type) []Provider {
	var ps []Provider
	switch t {
	case ClaudeLocal:
		ps = []Provider{ProviderAnthropic}
	case CodexLocal:
		ps = []Provider{ProviderOpenAI}
	case GeminiLocal:
		ps = []Provider{ProviderGemini}
	case OpencodeLocal:
		ps = []Provider{ProviderAnthropic, ProviderOpenAI}
	case PiLocal, AcpxLocal:
		ps = []Provider{ProviderAnthropic, ProviderOpenAI, ProviderGemini}
	}
	slices.Sort(ps)
	return ps
}
