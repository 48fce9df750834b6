package kubeexec

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

// callbackJWT stands for a Paperclip run JWT.
const callbackJWT = "eyJhbGciOiJIUzI1NiJ9.eyJydW4iOiJrdWJlIn0.c2lnbmF0dXJlLWt1YmUtdGVzdA"

// TestCallbackBuild: a request with Paperclip call-back credentials. The
// pod gets PAPERCLIP_API_URL from the config (never the writer's loopback
// apiUrl), PAPERCLIP_API_KEY from the per-run Secret, and the Paperclip
// agent id; the JWT is nowhere in the Job and is a secret value.
func TestCallbackBuild(t *testing.T) {
	m := loadModel(t)
	r := parseRun(t, m, "/spool", "0b7c9d7e.json", `{"apiVersion":"pcsync.io/v1alpha1","kind":"Run","companyId":"3f1c2a9e-acme",
		"agent":"coder","prompt":"wake up","paperclip":{"apiUrl":"http://127.0.0.1:3100","apiKey":"`+callbackJWT+`","agentId":"pc-agent-7"}}`)
	in, err := NewInput(r, testEnviron, BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	job, err := BuildJob(in, BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	jy, _ := yaml.Marshal(job)
	if strings.Contains(string(jy), callbackJWT) || strings.Contains(string(jy), "127.0.0.1") {
		t.Errorf("the Job holds the JWT or the writer's loopback URL:\n%s", jy)
	}
	got := map[string]corev1.EnvVar{}
	for _, e := range job.Spec.Template.Spec.Containers[0].Env {
		if strings.HasPrefix(e.Name, "PAPERCLIP_") {
			got[e.Name] = e
		}
	}
	ref := func(name string) *corev1.EnvVarSource {
		return &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: job.Name}, Key: SecretEnvPrefix + name, Optional: ptr.To(false)}}
	}
	want := map[string]corev1.EnvVar{
		"PAPERCLIP_API_KEY":    {Name: "PAPERCLIP_API_KEY", ValueFrom: ref("PAPERCLIP_API_KEY")},
		"PAPERCLIP_API_URL":    {Name: "PAPERCLIP_API_URL", Value: m.ServerURL()},
		"PAPERCLIP_AGENT_ID":   {Name: "PAPERCLIP_AGENT_ID", Value: "pc-agent-7"},
		"PAPERCLIP_COMPANY_ID": {Name: "PAPERCLIP_COMPANY_ID", Value: "3f1c2a9e-acme"},
		"PAPERCLIP_RUN_ID":     {Name: "PAPERCLIP_RUN_ID", Value: "0b7c9d7e"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("PAPERCLIP_* env of the container (-want +got):\n%s", diff)
	}
	sec, err := BuildSecret(in, job, BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := string(sec.Data[SecretEnvPrefix+"PAPERCLIP_API_KEY"]); got != callbackJWT {
		t.Errorf("Secret env.PAPERCLIP_API_KEY = %q, want the JWT", got)
	}
	found := false
	for _, v := range in.SecretValues() {
		found = found || v == callbackJWT
	}
	if !found {
		t.Error("the JWT is not among the values redacted from messages")
	}
}
