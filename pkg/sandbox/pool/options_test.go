package pool

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// A zero or negative field of Options takes its default; a positive one
// is kept.
func TestPoolOptionsComplete(t *testing.T) {
	d := DefaultOptions()
	d.Lease.Identity = "" // random: compared apart (TestPoolLeaseOptionsComplete)
	set := Options{Owner: "other", ReadyDeadline: 1, MemberMaxAge: 2, Resync: 3, QuotaBackoff: 4, ColdHold: 5, RoomWait: 6, PendingTTL: 7,
		Lease: LeaseOptions{Namespace: "ns", Identity: "me", LeaseDuration: 8, RenewDeadline: 9, RetryPeriod: 10}}
	tests := []struct {
		name     string
		in, want Options
	}{
		{"zero", Options{}, d},
		{"negative", Options{ReadyDeadline: -1, MemberMaxAge: -1, Resync: -time.Second, QuotaBackoff: -1, ColdHold: -1, RoomWait: -1, PendingTTL: -1}, d},
		{"set", set, set},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.in
			got.complete()
			if tt.in.Lease.Identity == "" {
				got.Lease.Identity = ""
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("complete (-want +got):\n%s", diff)
			}
		})
	}
}
