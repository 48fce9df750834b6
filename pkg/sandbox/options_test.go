package sandbox

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// A zero or negative duration of Options takes its default;
// a positive one is kept.
func TestOptionsComplete(t *testing.T) {
	d := DefaultOptions("/state")
	d.Metrics = noMetrics{}
	neg := Options{StateDir: "/state", DefaultLeaseTTL: -1, MaxLeaseTTL: -time.Hour, ReadyTimeout: -1, DeleteTimeout: -time.Second,
		PrestartWait: -1, PrestartMax: -1, SuspendCheck: -1, ClaimSweep: -1, ClaimGrace: -time.Minute}
	set := Options{StateDir: "/state", ServerPath: "/bin/x", DefaultLeaseTTL: time.Minute, MaxLeaseTTL: time.Hour,
		ReadyTimeout: time.Second, DeleteTimeout: 2 * time.Second, ExecProtocol: ExecSPDY, PrestartWait: 3 * time.Second, PrestartMax: 2,
		SuspendCheck: time.Second, ClaimSweep: 2 * time.Minute, ClaimGrace: time.Hour}
	wantSet := set
	wantSet.Logger, wantSet.Metrics = d.Logger, d.Metrics
	tests := []struct {
		name     string
		in, want Options
	}{
		{"zero", Options{StateDir: "/state"}, d},
		{"negative", neg, d},
		{"set", set, wantSet},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.in
			got.complete()
			if diff := cmp.Diff(tt.want, got, cmpopts.IgnoreFields(Options{}, "Logger"), cmpopts.IgnoreUnexported(Options{})); diff != "" {
				t.Errorf("complete (-want +got):\n%s", diff)
			}
		})
	}
}
