package adapters

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestEgressPortsFor(t *testing.T) {
	tests := []struct {
		env  map[string]string
		want []int
	}{
		{nil, nil},
		{map[string]string{"ANTHROPIC_BASE_URL": "https://gw.example.com/anthropic"}, nil},
		{map[string]string{"ANTHROPIC_BASE_URL": "https://gw.example.com:8443/anthropic"}, []int{8443}},
		{map[string]string{"ANTHROPIC_BASE_URL": "http://gw.example.com/anthropic"}, []int{80}},
		{map[string]string{"ANTHROPIC_BASE_URL": "http://10.0.0.1:8080"}, nil},
		{map[string]string{"SOMETHING_ELSE": "https://gw.example.com:9000"}, nil},
	}
	for _, tt := range tests {
		got, err := EgressPortsFor(ClaudeLocal, tt.env)
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(tt.want, got); d != "" {
			t.Errorf("EgressPortsFor(claude_local, %v) (-want +got):\n%s", tt.env, d)
		}
	}
}
