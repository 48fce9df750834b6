package kubeexec

import (
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/pcsync/pcsync/pkg/config"
)

// TestLaunchWaitsForTheProxy: in egress mode proxy, pcsync init waits for
// the egress proxy in full when the run found it without an available pod
// (scaled to zero), and else for a grace (a new pod's egress may be
// allowed a moment after it starts); in egress mode standard it does not
// wait.
func TestLaunchWaitsForTheProxy(t *testing.T) {
	m := loadModel(t)
	tests := []struct {
		name      string
		waitProxy bool
		mode      config.EgressMode
		grace     time.Duration
		want      []string // init's flags
	}{
		{name: "warm proxy", mode: config.EgressProxy, want: []string{"--proxy-grace", "3s"}},
		{name: "warm proxy, grace off", mode: config.EgressProxy, grace: -1, want: nil},
		{name: "cold proxy", waitProxy: true, mode: config.EgressProxy, want: []string{"--wait-proxy"}},
		{name: "cold, but egress mode standard", waitProxy: true, mode: config.EgressStandard, want: nil},
		{name: "warm, egress mode standard", mode: config.EgressStandard, want: nil},
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
			o := BuildOptions{ProxyGrace: tt.grace}
			o.complete()
			_, command, _ := in.launch(o)
			i := slices.Index(command, "--")
			if i < 2 || command[1] != "init" {
				t.Fatalf("command %q: want pcsync init … -- CLI", command)
			}
			if diff := cmp.Diff(tt.want, command[2:i], cmp.Comparer(func(a, b []string) bool { return slices.Equal(a, b) })); diff != "" {
				t.Errorf("init's flags (-want +got):\n%s", diff)
			}
		})
	}
}
