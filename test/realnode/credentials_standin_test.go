//go:build integration

package realnode

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
)

// The keys of TestRealCLIsThroughTheProxy: the credentials' (in the
// tenants' Secrets), the gateway's own key for the provider behind it
// (the gateway's, never a tenant's), and the keys Paperclip's execute env
// carries for stock adapters (replaced by the daemon).
const (
	cliAnthropicKey    = "sk-ant-cli-credential-held-by-the-proxy"
	cliOpenAIKey       = "sk-openai-cli-credential-held-by-the-proxy"
	gatewayKey         = "sk-litellm-master-key-held-by-the-proxy"
	gatewayUpstreamKey = "sk-openai-key-of-the-gateway-itself"
	paperclipOpenAIKey = "sk-paperclip-codex-adapter-env-key"
	// refusedKey is a credential's key that the Anthropic stand-in
	// refuses with 401, as Anthropic does a revoked key.
	refusedKey  = "sk-ant-revoked-credential-key"
	gatewayHost = "llm-gateway.test"
)

// The figures each stand-in answers with: a run's result must carry them.
const (
	standInAnthropicText = "Hello from the Anthropic stand-in."
	standInOpenAIText    = "Hello from the OpenAI stand-in."
	standInAnthropicIn   = 1234
	standInAnthropicOut  = 42
	standInOpenAIIn      = 321
	standInOpenAIOut     = 17
)

// providerStandIns are the model APIs of the test's own, one TLS listener
// in the test's network namespace for every name (by Host): the Anthropic
// Messages API, the OpenAI Responses API, and a gateway that speaks the
// OpenAI-compatible API as LiteLLM's proxy does (its own master key in
// Authorization; requests passed on to the OpenAI stand-in with the
// gateway's own provider key). Each model call's key is recorded.
type providerStandIns struct {
	mu   sync.Mutex
	seen map[string][]string // host → the key of each model call, in order
}

func newProviderStandIns() *providerStandIns {
	return &providerStandIns{seen: map[string][]string{}}
}

// keys returns the keys host's model calls carried.
func (s *providerStandIns) keys(host string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.seen[host]...)
}

func (s *providerStandIns) record(host, key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seen[host] = append(s.seen[host], key)
}

func (s *providerStandIns) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	host, _, err := net.SplitHostPort(r.Host)
	if err != nil {
		host = r.Host
	}
	switch host {
	case "api.anthropic.com":
		s.anthropic(w, r)
	case "api.openai.com":
		s.openai(w, r, strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "))
	case gatewayHost:
		s.gateway(w, r)
	default:
		http.NotFound(w, r)
	}
}

// anthropic answers a Messages request, streamed (SSE) when it asks.
func (s *providerStandIns) anthropic(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || !strings.HasPrefix(r.URL.Path, "/v1/messages") {
		w.WriteHeader(http.StatusOK) // Claude Code's reachability probe (HEAD /)
		return
	}
	s.record("api.anthropic.com", r.Header.Get("x-api-key"))
	if r.Header.Get("x-api-key") == refusedKey {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = io.WriteString(w, `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`)
		return
	}
	var req struct {
		Model  string `json:"model"`
		Stream bool   `json:"stream"`
	}
	_ = json.NewDecoder(r.Body).Decode(&req)
	usage := map[string]any{"input_tokens": standInAnthropicIn, "output_tokens": 1, "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0}
	if !req.Stream {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"id": "msg_standin", "type": "message", "role": "assistant", "model": req.Model,
			"content": []any{map[string]any{"type": "text", "text": standInAnthropicText}}, "stop_reason": "end_turn",
			"usage": map[string]any{"input_tokens": standInAnthropicIn, "output_tokens": standInAnthropicOut}})
		return
	}
	sse(w, []map[string]any{
		{"type": "message_start", "message": map[string]any{"id": "msg_standin", "type": "message", "role": "assistant",
			"model": req.Model, "content": []any{}, "stop_reason": nil, "usage": usage}},
		{"type": "content_block_start", "index": 0, "content_block": map[string]any{"type": "text", "text": ""}},
		{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "text_delta", "text": standInAnthropicText}},
		{"type": "content_block_stop", "index": 0},
		{"type": "message_delta", "delta": map[string]any{"stop_reason": "end_turn", "stop_sequence": nil},
			"usage": map[string]any{"output_tokens": standInAnthropicOut}},
		{"type": "message_stop"},
	})
}

// openai answers a Responses request with a streamed response; Codex's
// WebSocket attempt first gets a 404 (it then falls back to HTTPS).
func (s *providerStandIns) openai(w http.ResponseWriter, r *http.Request, key string) {
	if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/responses") {
		http.NotFound(w, r)
		return
	}
	s.record("api.openai.com", key)
	_, _ = io.Copy(io.Discard, r.Body)
	item := map[string]any{"type": "message", "id": "msg_standin", "role": "assistant", "status": "completed",
		"content": []any{map[string]any{"type": "output_text", "text": standInOpenAIText, "annotations": []any{}}}}
	sse(w, []map[string]any{
		{"type": "response.created", "response": map[string]any{"id": "resp_standin", "status": "in_progress"}},
		{"type": "response.output_item.added", "output_index": 0, "item": map[string]any{"type": "message", "id": "msg_standin",
			"role": "assistant", "status": "in_progress", "content": []any{}}},
		{"type": "response.output_text.delta", "item_id": "msg_standin", "output_index": 0, "content_index": 0, "delta": standInOpenAIText},
		{"type": "response.output_item.done", "output_index": 0, "item": item},
		{"type": "response.completed", "response": map[string]any{"id": "resp_standin", "status": "completed", "output": []any{item},
			"usage": map[string]any{"input_tokens": standInOpenAIIn, "input_tokens_details": map[string]any{"cached_tokens": 0},
				"output_tokens": standInOpenAIOut, "output_tokens_details": map[string]any{"reasoning_tokens": 0},
				"total_tokens": standInOpenAIIn + standInOpenAIOut}}},
	})
}

// gateway is LiteLLM's proxy in shape: its master key or a 401 in its
// words; then the request goes to the provider with the gateway's key.
func (s *providerStandIns) gateway(w http.ResponseWriter, r *http.Request) {
	key := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	if r.Method == http.MethodPost {
		s.record(gatewayHost, key)
	}
	if key != gatewayKey {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = io.WriteString(w, `{"error":{"message":"Authentication Error, Invalid proxy server token passed.","type":"auth_error","param":"None","code":"401"}}`)
		return
	}
	w.Header().Set("x-litellm-model-api-base", "https://api.openai.com/v1")
	s.openai(w, r, gatewayUpstreamKey)
}

// sse writes events as a streamed response, flushing each.
func sse(w http.ResponseWriter, events []map[string]any) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	f, _ := w.(http.Flusher)
	for _, ev := range events {
		b, _ := json.Marshal(ev)
		_, _ = io.WriteString(w, "event: "+ev["type"].(string)+"\ndata: "+string(b)+"\n\n")
		if f != nil {
			f.Flush()
		}
	}
}
