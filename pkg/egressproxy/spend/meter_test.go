package spend

import (
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pcsync/pcsync/pkg/adapters"
)

const anthropicSSE = "event: message_start\n" +
	`data: {"type":"message_start","message":{"id":"msg_01","type":"message","role":"assistant","model":"claude-sonnet-4-5-20250929","content":[],"stop_reason":null,"usage":{"input_tokens":12,"cache_creation_input_tokens":2000,"cache_read_input_tokens":30000,"output_tokens":1}}}` + "\n\n" +
	"event: content_block_start\n" +
	`data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}` + "\n\n" +
	": keep-alive comment\n\n" +
	"event: content_block_delta\n" +
	`data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a \"usage\": {\"output_tokens\": 999999} in text"}}` + "\n\n" +
	"event: content_block_delta\n" +
	`data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"usage\":{\"input_tokens\":5"}}` + "\n\n" +
	"event: message_delta\n" +
	`data: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"input_tokens":12,"cache_creation_input_tokens":2000,"cache_read_input_tokens":30000,"output_tokens":345}}` + "\n\n" +
	"event: message_stop\n" +
	`data: {"type":"message_stop"}` + "\n\n"

const anthropicJSON = `{"id":"msg_02","type":"message","role":"assistant","model":"claude-haiku-4-5-20251001",
  "content":[{"type":"tool_use","id":"t","name":"x","input":{"usage":{"input_tokens":777},"model":"gpt-5"}}],
  "stop_reason":"tool_use","usage":{"input_tokens":1500,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":88,"service_tier":"standard"}}`

const openaiChatJSON = `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"gpt-4o-mini-2024-07-18",
 "choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],
 "usage":{"prompt_tokens":1200,"completion_tokens":40,"total_tokens":1240,"prompt_tokens_details":{"cached_tokens":1024,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0}}}`

const openaiChatSSE = `data: {"id":"c","object":"chat.completion.chunk","model":"gpt-4.1-2025-04-14","choices":[{"index":0,"delta":{"role":"assistant","content":""}}],"usage":null}` + "\r\n\r\n" +
	`data: {"id":"c","object":"chat.completion.chunk","model":"gpt-4.1-2025-04-14","choices":[{"index":0,"delta":{"content":"Hello"}}],"usage":null}` + "\r\n\r\n" +
	`data: {"id":"c","object":"chat.completion.chunk","model":"gpt-4.1-2025-04-14","choices":[],"usage":{"prompt_tokens":300,"completion_tokens":25,"total_tokens":325,"prompt_tokens_details":{"cached_tokens":0}}}` + "\r\n\r\n" +
	"data: [DONE]\r\n\r\n"

const openaiResponsesSSE = "event: response.created\n" +
	`data: {"type":"response.created","sequence_number":0,"response":{"id":"resp_1","object":"response","status":"in_progress","model":"gpt-5-codex","usage":null}}` + "\n\n" +
	"event: response.output_text.delta\n" +
	`data: {"type":"response.output_text.delta","sequence_number":3,"item_id":"m","output_index":0,"content_index":0,"delta":"ok"}` + "\n\n" +
	"event: response.completed\n" +
	`data: {"type":"response.completed","sequence_number":9,"response":{"id":"resp_1","object":"response","status":"completed","model":"gpt-5-codex","output":[{"type":"message","content":[{"type":"output_text","text":"ok"}]}],` +
	`"usage":{"input_tokens":9000,"input_tokens_details":{"cached_tokens":8000},"output_tokens":120,"output_tokens_details":{"reasoning_tokens":64},"total_tokens":9120}}}` + "\n\n"

const openaiResponsesJSON = `{"id":"resp_2","object":"response","model":"o4-mini-2025-04-16","output":[],"usage":{"input_tokens":50,"input_tokens_details":{"cached_tokens":0},"output_tokens":10,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":60}}`

const geminiJSON = `{"candidates":[{"content":{"parts":[{"text":"Hi"}],"role":"model"},"finishReason":"STOP","index":0}],
 "usageMetadata":{"promptTokenCount":4000,"candidatesTokenCount":200,"totalTokenCount":4500,"cachedContentTokenCount":1000,"thoughtsTokenCount":300,"promptTokensDetails":[{"modality":"TEXT","tokenCount":4000}]},
 "modelVersion":"gemini-2.5-pro","responseId":"r"}`

const geminiSSE = `data: {"candidates":[{"content":{"parts":[{"text":"He"}],"role":"model"},"index":0}],"usageMetadata":{"promptTokenCount":100,"candidatesTokenCount":1,"totalTokenCount":101},"modelVersion":"gemini-2.5-flash"}` + "\r\n\r\n" +
	`data: {"candidates":[{"content":{"parts":[{"text":"llo"}],"role":"model"},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":100,"candidatesTokenCount":7,"totalTokenCount":130,"thoughtsTokenCount":23},"modelVersion":"gemini-2.5-flash"}` + "\r\n\r\n"

const geminiArray = `[{"candidates":[{"content":{"parts":[{"text":"He"}]}}],"usageMetadata":{"promptTokenCount":10,"candidatesTokenCount":1},"modelVersion":"gemini-2.0-flash"}
,{"candidates":[{"content":{"parts":[{"text":"y"}]}}],"usageMetadata":{"promptTokenCount":10,"candidatesTokenCount":2,"toolUsePromptTokenCount":5},"modelVersion":"gemini-2.0-flash"}]`

var meterCases = []struct {
	name     string
	provider adapters.Provider
	ctype    string
	body     string
	want     Usage
}{
	{"anthropic stream", adapters.ProviderAnthropic, "text/event-stream; charset=utf-8", anthropicSSE,
		Usage{Model: "claude-sonnet-4-5-20250929", Input: 12, CacheWrite: 2000, CacheRead: 30000, Output: 345}},
	{"anthropic json", adapters.ProviderAnthropic, "application/json", anthropicJSON,
		Usage{Model: "claude-haiku-4-5-20251001", Input: 1500, Output: 88}},
	{"openai chat json", adapters.ProviderOpenAI, "application/json", openaiChatJSON,
		Usage{Model: "gpt-4o-mini-2024-07-18", Input: 176, CacheRead: 1024, Output: 40}},
	{"openai chat stream", adapters.ProviderOpenAI, "text/event-stream", openaiChatSSE,
		Usage{Model: "gpt-4.1-2025-04-14", Input: 300, Output: 25}},
	{"openai responses stream", adapters.ProviderOpenAI, "text/event-stream", openaiResponsesSSE,
		Usage{Model: "gpt-5-codex", Input: 1000, CacheRead: 8000, Output: 120}},
	{"openai responses json", adapters.ProviderOpenAI, "application/json", openaiResponsesJSON,
		Usage{Model: "o4-mini-2025-04-16", Input: 50, Output: 10}},
	{"gemini json", adapters.ProviderGemini, "application/json; charset=UTF-8", geminiJSON,
		Usage{Model: "gemini-2.5-pro", Input: 3000, CacheRead: 1000, Output: 500}},
	{"gemini stream", adapters.ProviderGemini, "text/event-stream", geminiSSE,
		Usage{Model: "gemini-2.5-flash", Input: 100, Output: 30}},
	{"gemini json array", adapters.ProviderGemini, "application/json", geminiArray,
		Usage{Model: "gemini-2.0-flash", Input: 15, Output: 2}},
	{"error body", adapters.ProviderAnthropic, "application/json",
		`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, Usage{}},
	{"empty", adapters.ProviderOpenAI, "text/event-stream", "", Usage{}},
}

// meter reads body through a Meter in the chunks given and returns the
// bytes read and the usage.
func meter(t *testing.T, p adapters.Provider, ctype string, chunks [][]byte) (string, Usage) {
	t.Helper()
	var got []Usage
	m := NewMeter(p, ctype, io.NopCloser(&chunkReader{chunks: chunks}), func(u Usage) { got = append(got, u) })
	out, err := io.ReadAll(m)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 {
		t.Fatalf("done called %d times, want 1", len(got))
	}
	return string(out), got[0]
}

func TestMeter(t *testing.T) {
	for _, tc := range meterCases {
		t.Run(tc.name, func(t *testing.T) {
			want := tc.want
			want.Provider = tc.provider
			body := []byte(tc.body)
			// Whole, then split at every byte boundary, then a byte at a
			// time.
			splits := [][][]byte{{body}}
			for i := 1; i < len(body); i++ {
				splits = append(splits, [][]byte{body[:i], body[i:]})
			}
			var bytewise [][]byte
			for i := range body {
				bytewise = append(bytewise, body[i:i+1])
			}
			splits = append(splits, bytewise)
			for _, chunks := range splits {
				out, got := meter(t, tc.provider, tc.ctype, chunks)
				if out != tc.body {
					t.Fatalf("body changed by the meter")
				}
				if d := cmp.Diff(want, got); d != "" {
					t.Fatalf("chunks of %d (first %d bytes): usage (-want +got):\n%s", len(chunks), len(chunks[0]), d)
				}
			}
		})
	}
}

// TestMeterClosedEarly: a stream closed before its end counts what it
// reported until then (message_start's input), once.
func TestMeterClosedEarly(t *testing.T) {
	cut := strings.Index(anthropicSSE, "event: message_delta")
	var got []Usage
	m := NewMeter(adapters.ProviderAnthropic, "text/event-stream",
		io.NopCloser(strings.NewReader(anthropicSSE[:cut]+anthropicSSE)), func(u Usage) { got = append(got, u) })
	buf := make([]byte, cut)
	if _, err := io.ReadFull(m, buf); err != nil {
		t.Fatal(err)
	}
	_ = m.Close()
	_ = m.Close()
	want := []Usage{{Provider: adapters.ProviderAnthropic, Model: "claude-sonnet-4-5-20250929", Input: 12, CacheWrite: 2000, CacheRead: 30000, Output: 1}}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("(-want +got):\n%s", d)
	}
}

type chunkReader struct{ chunks [][]byte }

func (r *chunkReader) Read(p []byte) (int, error) {
	for len(r.chunks) > 0 && len(r.chunks[0]) == 0 {
		r.chunks = r.chunks[1:]
	}
	if len(r.chunks) == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.chunks[0])
	r.chunks[0] = r.chunks[0][n:]
	return n, nil
}
