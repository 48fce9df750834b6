package kubeexec

import (
	"slices"
	"testing"

	"github.com/pcsync/pcsync/pkg/config"
)

// TestLaunchWaitsForAColdProxy: pcsync init waits for the egress proxy
// only when the run found it without an available pod (scaled to zero),
// and only in egress mode proxy.
func TestLaunchWaitsForAColdProxy(t *testing.T) {
	m := loadModel(t)
	tests := []struct {
		name      string
		waitProxy bool
		mode      config.EgressMode
		want      bool
	}{
		{name: "warm proxy", waitProxy: false, mode: config.EgressProxy, want: false},
		{name: "cold proxy", waitProxy: true, mode: config.EgressProxy, want: true},
		{name: "cold, but egress mode standard", waitProxy: true, mode: config.EgressStandard, want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := parseRun(t, m, "/spool", builderCases[0].file, builderCases[0].body)
			in, err := NewInput(r, testEnviron, BuildOptions{})
			if err != nil {
				t.Fatal(err)
			}
			company := *in.Company
			company.Spec.Egress.Mode = tt.mode
			in.Company, in.WaitProxy = &company, tt.waitProxy
			_, command, _ := in.launch(BuildOptions{})
			if got := slices.Contains(command, "--wait-proxy"); got != tt.want {
				t.Errorf("command %q waits for the proxy: %v, want %v", command, got, tt.want)
			}
			if i := slices.Index(command, "--"); i < 0 || command[1] != "init" {
				t.Errorf("command %q: want pcsync init … -- CLI", command)
			}
		})
	}
}
