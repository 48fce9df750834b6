package adapters

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestWithBaseURL: codex exec gets openai_base_url from OPENAI_BASE_URL
// (codex reads it from its config only); nothing else changes.
func TestWithBaseURL(t *testing.T) {
	env := map[string]string{"OPENAI_BASE_URL": "http://10.0.0.1:3128/credentials/oai/v1"}
	tests := []struct {
		name string
		t    Type
		argv []string
		env  map[string]string
		want []string
	}{
		{"codex exec", CodexLocal, []string{"codex", "exec", "--json", "-"}, env,
			[]string{"codex", "exec", "-c", `openai_base_url="http://10.0.0.1:3128/credentials/oai/v1"`, "--json", "-"}},
		{"no base URL", CodexLocal, []string{"codex", "exec", "-"}, nil, []string{"codex", "exec", "-"}},
		{"set already", CodexLocal, []string{"codex", "exec", "-c", `openai_base_url="x"`, "-"}, env,
			[]string{"codex", "exec", "-c", `openai_base_url="x"`, "-"}},
		{"not exec", CodexLocal, []string{"codex-acp"}, env, []string{"codex-acp"}},
		{"another CLI", OpencodeLocal, []string{"opencode", "run", "exec"}, env, []string{"opencode", "run", "exec"}},
	}
	for _, tc := range tests {
		if diff := cmp.Diff(tc.want, WithBaseURL(tc.t, tc.argv, tc.env)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, diff)
		}
	}
}
