package adapters

import (
	"strings"
	"testing"

	"github.com/pcsync/pcsync/pkg/result"
)

func TestRedact(t *testing.T) {
	r := newRedactor([]string{"hunter2-proxy-secret", "1", "us-east-1-but-long", "hunter2-proxy"})
	tests := []struct{ in, want string }{
		{"Invalid API key: sk-ant-api03-AbCdEfGh_123-xyz", "Invalid API key: [redacted]"},
		{"key sk-proj-abcdefgh1234 rejected", "key [redacted] rejected"},
		{"Authorization: Bearer eyJhbGciOi.J9abc123", "Authorization: Bearer [redacted]"},
		{"Missing bearer or basic authentication in header", "Missing bearer or basic authentication in header"},
		{"Basic dXNlcjpwYXNzd29yZA== denied", "Basic [redacted] denied"},
		{"google key AIzaSyA-1234567890abcdefghijklmnop", "google key [redacted]"},
		{"aws AKIAIOSFODNN7EXAMPLE id", "aws [redacted] id"},
		{"token ghp_abcdefghijklmnopqrstuvwxyz0123", "token [redacted]"},
		{"jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.sflKxwRJSMeKKF2QT4", "jwt [redacted]"},
		{"Incorrect API key provided: disabled. You can find", "Incorrect API key provided: [redacted]. You can find"},
		{"Incorrect API key provided: sk-abc***xyz", "Incorrect API key provided: [redacted]"},
		{`{"api_key": "abc123def456"}`, `{"api_key": "[redacted]"}`},
		{"password=opensesame99", "password=[redacted]"},
		{"proxy said hunter2-proxy-secret and hunter2-proxy", "proxy said [redacted] and [redacted]"},
		{"exit code 1 in us-east-1", "exit code 1 in us-east-1"},
		{"input_tokens: 12345678", "input_tokens: 12345678"},
	}
	for _, tt := range tests {
		if got := r.redact(tt.in); got != tt.want {
			t.Errorf("redact(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// A secret passed in ParserOptions never reaches an error message, whatever
// the adapter and wherever it appears (stream or stderr).
func TestSecretsNeverInErrorMessages(t *testing.T) {
	const secret = "prx-9f8e7d6c5b4a"
	streams := map[Type]string{
		ClaudeLocal:   `{"type":"result","subtype":"success","is_error":true,"result":"proxy rejected key prx-9f8e7d6c5b4a"}`,
		CodexLocal:    `{"type":"turn.failed","error":{"message":"proxy rejected key prx-9f8e7d6c5b4a"}}`,
		GeminiLocal:   `{"type":"result","status":"error","error":{"type":"Error","message":"proxy rejected key prx-9f8e7d6c5b4a"}}`,
		CursorLocal:   `{"type":"result","subtype":"error","is_error":true,"result":"proxy rejected key prx-9f8e7d6c5b4a"}`,
		OpencodeLocal: `{"type":"error","error":{"name":"APIError","data":{"message":"proxy rejected key prx-9f8e7d6c5b4a"}}}`,
		PiLocal:       `{"type":"message_end","message":{"role":"assistant","stopReason":"error","errorMessage":"proxy rejected key prx-9f8e7d6c5b4a"}}`,
		AcpxLocal:     `{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"proxy rejected key prx-9f8e7d6c5b4a"}}`,
	}
	for _, typ := range Types() {
		a, _ := Get(typ)
		for _, viaStderr := range []bool{false, true} {
			p := a.NewParser(ParserOptions{Secrets: []string{secret}})
			proc := exit(1)
			if viaStderr {
				proc.Stderr = "Error: proxy rejected key " + secret + "\n"
			} else {
				p.Feed([]byte(streams[typ]))
			}
			o := p.Finish(proc)
			if !o.Failed || o.ErrorMessage == nil {
				t.Errorf("%s (stderr %v): not failed", typ, viaStderr)
				continue
			}
			if strings.Contains(*o.ErrorMessage, secret) || !strings.Contains(*o.ErrorMessage, Redacted) {
				t.Errorf("%s (stderr %v): message %q leaks or lacks the redaction", typ, viaStderr, *o.ErrorMessage)
			}
			if *o.ErrorCode != result.ErrAgentFailed {
				t.Errorf("%s (stderr %v): code %s, want agent_failed", typ, viaStderr, *o.ErrorCode)
			}
		}
	}
}

func TestTruncate(t *testing.T) {
	s := strings.Repeat("é", 10) // 20 bytes
	got := truncate(s, 9)
	if len(got) > 9 || !strings.HasSuffix(got, "…") || !strings.HasPrefix(got, "éé") {
		t.Errorf("truncate = %q (%d bytes)", got, len(got))
	}
	if truncate("short", 10) != "short" {
		t.Error("truncate changed a short string")
	}
	long := newRedactor(nil).clean(strings.Repeat("x", 5000))
	if len(long) != maxMessageLen {
		t.Errorf("clean left %d bytes, want %d", len(long), maxMessageLen)
	}
}
