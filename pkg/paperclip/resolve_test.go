package paperclip

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestResolveAgentUnanswered: a Paperclip that does not answer is an
// error naming the agent and the company, never a guess; a 404 is an agent
// Paperclip does not know (no error).
func TestResolveAgentUnanswered(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/api/agents/gone" {
			http.Error(w, `{"error":"Agent not found"}`, http.StatusNotFound)
			return
		}
		http.Error(w, `{"error":"database is down"}`, http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	m := model(ptrAgent("coder", ""))
	m.Settings.Spec.Paperclip.URL = srv.URL
	r := New(DefaultOptions())
	c := &m.Companies[0]
	if got, err := r.ResolveAgent(context.Background(), m, c, "gone"); got != "" || err != nil {
		t.Errorf("ResolveAgent of an id Paperclip does not know = %q, %v; want \"\", nil", got, err)
	}
	got, err := r.ResolveAgent(context.Background(), m, c, "a1")
	if got != "" || err == nil || !strings.Contains(err.Error(), "paperclip agent a1 of company acme: ") ||
		!strings.Contains(err.Error(), "503") {
		t.Errorf("ResolveAgent with Paperclip failing = %q, %v; want an error naming agent a1, company acme and the 503", got, err)
	}
	srv.Close()
	if _, err := r.ResolveAgent(context.Background(), m, c, "a1"); err == nil || !strings.Contains(err.Error(), "unreachable") {
		t.Errorf("ResolveAgent with Paperclip gone: %v; want unreachable", err)
	}
}
