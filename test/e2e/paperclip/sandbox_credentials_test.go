//go:build integration

package paperclip

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The keys Paperclip's agents carry in adapterConfig.env: the company
// declares credentials for both providers, so neither may reach a lease.
const (
	paperclipAnthropicKey = "sk-ant-e2e-paperclip-adapter-key"
	paperclipOpenAIKey    = "sk-e2e-paperclip-codex-adapter-key"
)

// TestSandboxCredentials: through the real Paperclip, stock claude_local
// and codex_local runs in pcsync's sandbox, whose adapterConfig.env carry
// keys, for a company that declares a credential for each provider (egress
// mode proxy). The CLIs get the lease's token and the proxy's credential
// route instead of Paperclip's keys; the runs succeed;
// Paperclip's keys are in no CLI's env or arguments, the daemon's log or
// the API server's audit log.
func TestSandboxCredentials(t *testing.T) {
	srv := sharedServer(t)
	sw := newSandboxWorld(t, srv, sandboxOptions{Company: map[string]any{
		"egress": map[string]any{"mode": "proxy"},
		// Validate wants an agent that uses each credential's provider.
		"agents": []any{map[string]any{"name": "claude", "adapter": "claude_local"}, map[string]any{"name": "codex", "adapter": "codex_local"}},
		"credentials": []any{
			map[string]any{"name": "claude", "provider": "anthropic", "secretRef": map[string]any{"name": "model-keys", "key": "anthropic"}},
			map[string]any{"name": "codex", "provider": "openai", "secretRef": map[string]any{"name": "model-keys", "key": "openai"}},
		},
	}})
	// The credentials' Secret (only the proxy's pod would mount it).
	if _, err := sw.c.Client().CoreV1().Secrets(sw.ns).Create(context.Background(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "model-keys"},
		StringData: map[string]string{"anthropic": "sk-ant-e2e-credential", "openai": "sk-e2e-credential"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	runs := []struct {
		adapter, transcript string
		env                 map[string]string
		keyVar, baseVar     string
		route               string
	}{
		{"claude_local", "claude-obers-small-success.jsonl", map[string]string{"ANTHROPIC_API_KEY": paperclipAnthropicKey},
			"ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "/credentials/claude"},
		{"codex_local", "codex-docs-readme-check.jsonl", map[string]string{"OPENAI_API_KEY": paperclipOpenAIKey},
			"CODEX_API_KEY", "OPENAI_BASE_URL", "/credentials/codex/v1"},
	}
	for _, r := range runs {
		tr := readTranscript(t, r.transcript)
		ag := sw.sandboxAgent(t, "Cred "+r.adapter, r.adapter, tr, r.env, nil)
		run := srv.API.wake(t, ag.ID, "e2e: sandbox credentials")
		waitSucceeded(t, srv, run.ID, r.adapter, 3*time.Minute)
		_, env, _ := sw.pc.recorded(strings.ToLower(run.ID))
		if !strings.HasPrefix(env[r.keyVar], "pcsync-run-") || !strings.HasSuffix(env[r.baseVar], r.route) {
			t.Errorf("%s: the CLI got %s=%.12q… and %s=%q; want the lease's token and the proxy's route …%s",
				r.adapter, r.keyVar, env[r.keyVar], r.baseVar, env[r.baseVar], r.route)
		}
		for k, v := range env {
			if strings.Contains(v, paperclipAnthropicKey) || strings.Contains(v, paperclipOpenAIKey) {
				t.Errorf("%s: Paperclip's key reached the CLI in %s", r.adapter, k)
			}
		}
	}
	audit := readFile(t, sw.c.AuditLogPath())
	if countExecs(t, sw.c, sw.ns) == 0 {
		t.Errorf("no pod exec of namespace %s in the audit log: the check below proves nothing", sw.ns)
	}
	for _, k := range []string{paperclipAnthropicKey, paperclipOpenAIKey} {
		if strings.Contains(audit, k) || strings.Contains(sw.daemon.out.String(), k) {
			t.Errorf("Paperclip's key %.14q… is in the audit log or the daemon's log", k)
		}
	}
	sw.waitNoPods(t, time.Minute)
}
