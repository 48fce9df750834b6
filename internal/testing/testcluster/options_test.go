package testcluster

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// A zero or negative count or duration of Options and RealNodeOptions
// takes its default; a positive one is kept.
func TestOptionsComplete(t *testing.T) {
	d, dr := DefaultOptions(), DefaultRealNodeOptions()
	type fields struct {
		NodePods                             int
		StartTimeout, StopGrace, LockTimeout time.Duration
	}
	defaults := fields{d.NodePods, d.StartTimeout, d.StopGrace, dr.LockTimeout}
	tests := []struct {
		name string
		in   fields
		want fields
	}{
		{"zero", fields{}, defaults},
		{"negative", fields{-1, -time.Second, -1, -time.Minute}, defaults},
		{"set", fields{3, time.Second, 2 * time.Second, time.Minute}, fields{3, time.Second, 2 * time.Second, time.Minute}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := Options{NodePods: tt.in.NodePods, StartTimeout: tt.in.StartTimeout, StopGrace: tt.in.StopGrace}
			r := RealNodeOptions{LockTimeout: tt.in.LockTimeout}
			o.complete()
			r.complete()
			if diff := cmp.Diff(tt.want, fields{o.NodePods, o.StartTimeout, o.StopGrace, r.LockTimeout}); diff != "" {
				t.Errorf("complete (-want +got):\n%s", diff)
			}
		})
	}
}
