package kubeexec

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// A zero or negative UID, or grace, takes its default; a positive one is
// kept.
func TestOptionsComplete(t *testing.T) {
	d := DefaultOptions()
	type fields struct {
		UID                                                                 int64
		UnschedulableGrace, QuotaGrace, ConfigErrorGrace, LogReconnectDelay int64
	}
	get := func(o Options) fields {
		return fields{o.Build.UID, int64(o.UnschedulableGrace), int64(o.QuotaGrace), int64(o.ConfigErrorGrace), int64(o.LogReconnectDelay)}
	}
	tests := []struct {
		name string
		in   Options
		want fields
	}{
		{"zero", Options{}, get(d)},
		{"negative", Options{Build: BuildOptions{UID: -1}, UnschedulableGrace: -1, QuotaGrace: -1, ConfigErrorGrace: -1, LogReconnectDelay: -1}, get(d)},
		{"set", Options{Build: BuildOptions{UID: 2000}, UnschedulableGrace: 1, QuotaGrace: 2, ConfigErrorGrace: 3, LogReconnectDelay: 4}, fields{2000, 1, 2, 3, 4}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.in
			got.complete()
			if diff := cmp.Diff(tt.want, get(got)); diff != "" {
				t.Errorf("complete (-want +got):\n%s", diff)
			}
		})
	}
}
