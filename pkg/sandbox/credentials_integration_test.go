//go:build integration

package sandbox

import (
	"context"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestAcquireRefusedWithoutCredentialSecret: a lease of a company whose
// credential (spec.credentials) the lease's CLI uses is refused before any
// pod is created when the credential's Secret does not exist, naming the
// Secret, the credential and how to create it; nothing is journaled; and
// Paperclip's environment probe warns of it. A
// lease of a CLI that uses no declared credential is not held up. With the
// Secret created, the lease is acquired.
func TestAcquireRefusedWithoutCredentialSecret(t *testing.T) {
	e := newEnv(t, envOptions{ProxyIP: "10.0.0.42", Agents: "[{name: coder, adapter: claude_local}]",
		Credentials: "[{name: claude, provider: anthropic, type: apiKey, secretRef: {name: model-keys, key: anthropic}}]"})
	ctx := context.Background()
	missing := "credential " + e.slug() + "/claude: Secret " + e.ns +
		"/model-keys does not exist, so the egress proxy has no key to give this run's CLI; create it in namespace " + e.ns +
		` with key "anthropic" (kubectl -n ` + e.ns + " create secret generic model-keys --from-file=anthropic=<file holding the key>)"
	// Paperclip's environment probe warns of it.
	wantDiag := Diagnostic{Severity: SeverityWarning, Code: CodeCredentialMissing, Message: "leases whose CLI uses anthropic are refused: " + missing}
	if got := credentialDiagnostics(e.m.Probe(ctx, map[string]any{"company": e.slug()})); len(got) != 1 || got[0] != wantDiag {
		t.Errorf("probe: %+v, want %+v", got, wantDiag)
	}
	_, err := e.m.Acquire(ctx, AcquireParams{Config: EnvironmentConfig{Company: e.slug()}, AdapterType: "claude_local", RunID: "run-1"})
	want := &UserError{Code: CodeCredentialMissing, Message: "no pod created: " + missing}
	var ue *UserError
	if !errors.As(err, &ue) || *ue != *want {
		t.Errorf("acquire:\n got %v\nwant %s: %s", err, want.Code, want.Message)
	}
	pods, err := e.c.Client().CoreV1().Pods(e.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != 0 || len(e.m.j.leases()) != 0 {
		t.Errorf("after the refusal: %d pods, %d journal entries; want none", len(pods.Items), len(e.m.j.leases()))
	}

	// Gemini's CLI uses no credential of the company: its lease goes on.
	info, err := e.m.Acquire(ctx, AcquireParams{Config: EnvironmentConfig{Company: e.slug()}, AdapterType: "gemini_local", RunID: "run-2"})
	if err != nil {
		t.Fatalf("acquire of gemini_local: %v\nlogs:\n%s", err, e.logs.String())
	}
	if _, err := e.m.Release(ctx, ReleaseParams{ID: info.ID, Cancel: true}); err != nil {
		t.Error(err)
	}

	if _, err := e.c.Client().CoreV1().Secrets(e.ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "model-keys"},
		StringData: map[string]string{"anthropic": "sk-ant-lease-check"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := credentialDiagnostics(e.m.Probe(ctx, map[string]any{"company": e.slug()})); len(got) != 0 {
		t.Errorf("probe with the Secret: %+v, want no credential diagnostic", got)
	}
	e.acquire(t, EnvironmentConfig{})
}

// credentialDiagnostics are the probe's diagnostics of code
// credential_missing.
func credentialDiagnostics(p ProbeResponse) []Diagnostic {
	var out []Diagnostic
	for _, d := range p.Diagnostics {
		if d.Code == CodeCredentialMissing {
			out = append(out, d)
		}
	}
	return out
}
