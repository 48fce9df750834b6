package spool

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/pcsync/pcsync/internal/lib/redact"
	"github.com/pcsync/pcsync/pkg/runs"
)

// TestSecretsRedactedFromResultAndLog: an agent that echoes its API key
// into its session id, model, summary and log (the key split across two
// writes, an Authorization header too) leaves no trace of it in the result
// or the log; both carry the one marker, and both are 0600.
func TestSecretsRedactedFromResultAndLog(t *testing.T) {
	h := newHarness(t, `
  - name: leaky
    adapter: claude_local
    env: {AGENT_MODE: leak}
`)
	key := "sk-test-secret-value-123456" // the harness's ANTHROPIC_API_KEY
	h.drop("leak.yaml", request("leaky", ""))
	h.once()
	res := h.result("leak")
	paths := runs.Paths{Spool: h.spool, Name: "leak"}
	raw, err := os.ReadFile(paths.Result())
	if err != nil {
		t.Fatal(err)
	}
	logData, err := os.ReadFile(paths.Log())
	if err != nil {
		t.Fatal(err)
	}
	for what, data := range map[string]string{"result": string(raw), "log": string(logData)} {
		for _, leak := range []string{key, "pc1-abcdef0123456789", key[:10] + "\n"} {
			if strings.Contains(data, leak) {
				t.Errorf("the %s holds %q:\n%s", what, leak, data)
			}
		}
		if !strings.Contains(data, redact.Marker) {
			t.Errorf("the %s has no %s marker:\n%s", what, redact.Marker, data)
		}
	}
	var fields map[string]any
	if err := json.Unmarshal(raw, &fields); err != nil {
		t.Fatal(err)
	}
	if res.SessionID == nil || *res.SessionID != "sess-"+redact.Marker {
		t.Errorf("sessionId = %v, want sess-%s", deref(res.SessionID), redact.Marker)
	}
	for _, p := range []string{paths.Result(), paths.Log()} {
		if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v (%v), want 0600", p, fi.Mode().Perm(), err)
		}
	}
}
