package runs

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestEnvSpecPrecedence: a later source wins (basics, forwarded keys, the
// agent's env, the adapter's env, HOME, the wake context, the PAPERCLIP_*
// variables pcsync sets); forwarded keys, context and the JWT are secret.
func TestEnvSpecPrecedence(t *testing.T) {
	s := EnvSpec{
		Basic:     map[string]string{"PATH": "/bin", "LANG": "C", "TZ": "UTC"},
		Forwarded: map[string]string{"PATH": "/fwd", "API_TOKEN": "tok", "LANG": "C.UTF-8"},
		Agent:     map[string]string{"LANG": "de_DE", "MODE": "agent", "HOME": "/agent-home"},
		Adapter:   map[string]string{"MODE": "adapter"},
		Home:      "/home/acme/coder",
		Context:   map[string]any{"taskId": "t-1", "PAPERCLIP_RUN_ID": "from-context", "wakeReason": "manual"},
		RunID:     "r-1", CompanyID: "co-1", AgentID: "ag-1",
		APIURL: "http://127.0.0.1:3100", APIKey: "jwt",
	}
	want := []EnvVar{
		{Name: "API_TOKEN", Value: "tok", Secret: true},
		{Name: "HOME", Value: "/home/acme/coder"},
		{Name: "LANG", Value: "de_DE"},
		{Name: "MODE", Value: "adapter"},
		{Name: "PAPERCLIP_AGENT_ID", Value: "ag-1"},
		{Name: "PAPERCLIP_API_KEY", Value: "jwt", Secret: true},
		{Name: "PAPERCLIP_API_URL", Value: "http://127.0.0.1:3100"},
		{Name: "PAPERCLIP_COMPANY_ID", Value: "co-1"},
		{Name: "PAPERCLIP_PAPERCLIP_RUN_ID", Value: "from-context", Secret: true},
		{Name: "PAPERCLIP_RUN_ID", Value: "r-1"},
		{Name: "PAPERCLIP_TASK_ID", Value: "t-1", Secret: true},
		{Name: "PAPERCLIP_WAKE_REASON", Value: "manual", Secret: true},
		{Name: "PATH", Value: "/fwd", Secret: true},
		{Name: "TZ", Value: "UTC"},
	}
	if diff := cmp.Diff(want, s.Vars()); diff != "" {
		t.Errorf("Vars (-want +got):\n%s", diff)
	}
	var lines []string
	for _, v := range want {
		lines = append(lines, v.Name+"="+v.Value)
	}
	if diff := cmp.Diff(lines, s.Build()); diff != "" {
		t.Errorf("Build (-want +got):\n%s", diff)
	}
	// No JWT, no URL: neither variable.
	s.APIURL, s.APIKey = "", ""
	for _, v := range s.Vars() {
		if v.Name == "PAPERCLIP_API_URL" || v.Name == "PAPERCLIP_API_KEY" {
			t.Errorf("%s set without a value", v.Name)
		}
	}
}

// TestContextValue: every value a parsed request can hold renders the same
// for both executors, numbers without exponent notation.
func TestContextValue(t *testing.T) {
	for _, tc := range []struct {
		v    any
		want string
	}{
		{"x", "x"},
		{true, "true"},
		{float64(1e21), "1000000000000000000000"},
		{float64(0.5), "0.5"},
		{float32(0.1), "0.1"},
		{int(42), "42"},
		{int64(-7), "-7"},
		{uint8(3), "3"},
		{2 * time.Second, "2s"},
	} {
		if got := ContextValue(tc.v); got != tc.want {
			t.Errorf("ContextValue(%#v) = %q, want %q", tc.v, got, tc.want)
		}
	}
}

// TestEnvMapAndBasics: only the basics come from the daemon's environment
// unasked.
func TestEnvMapAndBasics(t *testing.T) {
	daemon := EnvMap([]string{"PATH=/bin", "LANG=C", "SECRET=s", "EQ=a=b", "BROKEN"})
	if diff := cmp.Diff(map[string]string{"PATH": "/bin", "LANG": "C", "SECRET": "s", "EQ": "a=b"}, daemon); diff != "" {
		t.Errorf("EnvMap (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]string{"PATH": "/bin", "LANG": "C"}, BasicEnv(daemon)); diff != "" {
		t.Errorf("BasicEnv (-want +got):\n%s", diff)
	}
}
