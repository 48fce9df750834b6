package kubeexec

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	"github.com/pcsync/pcsync/internal/lib/agentpod"
	"github.com/pcsync/pcsync/pkg/adapters"
	"github.com/pcsync/pcsync/pkg/config"
	"github.com/pcsync/pcsync/pkg/egressproxy/agentenv"
	"github.com/pcsync/pcsync/pkg/egressproxy/inject"
)

// TestCredentialsInTheRun: a run of a company that declares an anthropic
// credential gets the token (in the per-run Secret only) in place of the
// key the daemon's env holds, the proxy's credential route as the base
// URL, the provider's other key variables set empty, and the token's hash
// on its pod; the key is nowhere in the Job or the Secret.
func TestCredentialsInTheRun(t *testing.T) {
	m := loadModel(t)
	r := parseRun(t, m, "/spool", "k.json", `{"apiVersion":"pcsync.io/v1alpha1","kind":"Run","company":"acme","agent":"coder","prompt":"p"}`)
	c := *r.Company
	c.Spec.Credentials = []config.Credential{{Name: "claude", Provider: adapters.ProviderAnthropic, Type: adapters.KeyAPIKey,
		SecretRef: config.CredentialSecretRef{Name: "keys", Key: "anthropic"}}}
	r.Company = &c
	in, err := NewInput(r, append(testEnviron, "CLAUDE_CODE_OAUTH_TOKEN=oauth-from-the-daemon"), BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	token, _ := inject.NewToken()
	in.Credentials = agentenv.CredentialsFor(in.Company, adapters.ClaudeLocal, "10.96.0.42", token)
	job, err := BuildJob(in, BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	job.UID = types.UID("00000000-0000-0000-0000-0000000000aa")
	sec, err := BuildSecret(in, job, BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for _, e := range job.Spec.Template.Spec.Containers[0].Env {
		v := e.Value
		if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			v = "secret:" + string(sec.Data[e.ValueFrom.SecretKeyRef.Key]) + sec.StringData[e.ValueFrom.SecretKeyRef.Key]
		}
		env[e.Name] = v
	}
	want := map[string]string{
		"ANTHROPIC_API_KEY":       "secret:" + token,
		"ANTHROPIC_BASE_URL":      "http://10.96.0.42:3128/credentials/claude",
		"ANTHROPIC_AUTH_TOKEN":    "",
		"CLAUDE_CODE_OAUTH_TOKEN": "",
	}
	got := map[string]string{}
	for k := range want {
		got[k] = env[k]
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the run's credential env (-want +got):\n%s", diff)
	}
	if h := job.Spec.Template.Annotations[agentpod.AnnotationTokenHash]; h != agentpod.TokenHash(token) {
		t.Errorf("the pod's token hash %q, want the token's", h)
	}
	all, _ := yaml.Marshal([]any{job, sec})
	for _, key := range []string{"sk-ant-test-0123456789", "oauth-from-the-daemon"} {
		if strings.Contains(string(all), key) {
			t.Errorf("the key %q is in the run's Job or Secret", key)
		}
	}
	for _, e := range job.Spec.Template.Spec.Containers[0].Env {
		if e.Name == "ANTHROPIC_API_KEY" && (e.ValueFrom == nil || e.Value != "") {
			t.Errorf("the token is not a secretKeyRef: %+v", e)
		}
	}
	if !slices.Contains(in.SecretValues(), token) {
		t.Error("the token is not among the run's secret values (it would not be redacted)")
	}
}
