package main

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestDaemonShardNames: --shard names the shard's Lease and ApplySet
// pcsync-<shard> where the flags keep pcsync's defaults, and must be a DNS
// label.
func TestDaemonShardNames(t *testing.T) {
	tests := []struct {
		shard, lease, set string
		wantLease         string
		wantSet           string
		wantErr           bool
	}{
		{"", "pcsync", "pcsync", "pcsync", "pcsync", false},
		{"blue", "pcsync", "pcsync", "pcsync-blue", "pcsync-blue", false},
		{"blue", "mine", "ours", "mine", "ours", false},
		{"Blue_1", "pcsync", "pcsync", "", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.shard, func(t *testing.T) {
			f := daemonFlags{shard: tt.shard, leaseID: tt.lease}
			f.set.name = tt.set
			err := f.shardNames()
			if (err != nil) != tt.wantErr {
				t.Fatalf("shardNames() = %v, want error %v", err, tt.wantErr)
			}
			if tt.wantErr {
				return
			}
			if diff := cmp.Diff([]string{tt.wantLease, tt.wantSet}, []string{f.leaseID, f.set.name}); diff != "" {
				t.Errorf("Lease, ApplySet (-want +got):\n%s", diff)
			}
		})
	}
}
