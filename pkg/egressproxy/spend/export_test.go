package spend

// The payloads of meter_test.go, for the external tests.
const (
	AnthropicStream = anthropicSSE
	OpenAIChat      = openaiChatJSON
	GeminiJSON      = geminiJSON
)
