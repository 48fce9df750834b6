package pool

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/apimachinery/pkg/util/validation"
)

// A zero or negative field of LeaseOptions takes its default (the
// identity a fresh random one); a positive one is kept.
func TestPoolLeaseOptionsComplete(t *testing.T) {
	d := DefaultLeaseOptions()
	set := LeaseOptions{Namespace: "ns", Identity: "me", LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: time.Second}
	tests := []struct {
		name     string
		in, want LeaseOptions
	}{
		{"zero", LeaseOptions{}, d},
		{"negative", LeaseOptions{LeaseDuration: -1, RenewDeadline: -time.Second, RetryPeriod: -1}, d},
		{"set", set, set},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.in
			got.complete()
			if diff := cmp.Diff(tt.want, got, cmpopts.IgnoreFields(LeaseOptions{}, "Identity")); diff != "" {
				t.Errorf("complete (-want +got):\n%s", diff)
			}
			if got.Identity == "" || tt.in.Identity != "" && got.Identity != tt.in.Identity {
				t.Errorf("identity %q from %q; want the given one, else a default", got.Identity, tt.in.Identity)
			}
		})
	}
}

// Timings the election cannot keep are refused, the defaults and a short
// set (the tests') are not.
func TestPoolLeaseOptionsValidate(t *testing.T) {
	tests := []struct {
		name                   string
		duration, renew, retry time.Duration
		wantErr                string
	}{
		{"defaults", 15 * time.Second, 10 * time.Second, 2 * time.Second, ""},
		{"short", 3 * time.Second, 2 * time.Second, 500 * time.Millisecond, ""},
		{"renew as long as the lease", 10 * time.Second, 10 * time.Second, time.Second, "renew deadline 10s must be shorter than the lease duration 10s"},
		{"retry too long for the renew", 15 * time.Second, 2 * time.Second, 2 * time.Second, "renew deadline 2s must be longer than 1.2 × the retry period 2s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := LeaseOptions{LeaseDuration: tt.duration, RenewDeadline: tt.renew, RetryPeriod: tt.retry}
			err := o.validate()
			got := ""
			if err != nil {
				got = err.Error()
			}
			if tt.wantErr == "" && got != "" || tt.wantErr != "" && !strings.Contains(got, tt.wantErr) {
				t.Errorf("validate: %q; want %q", got, tt.wantErr)
			}
		})
	}
}

// A Lease's name for any owner (an ApplySet ID holds upper case and "_")
// is a valid object name, the same for the same owner, another for
// another.
func TestPoolLeaseName(t *testing.T) {
	owners := []string{"pcsync", "applyset-0eFHV8ySqp7XoShsGvyWFQD3s96yqwHmzc4e0HR1dsY-v1", "applyset-Ab_cd-v1", strings.Repeat("x", 63)}
	seen := map[string]string{}
	for _, o := range owners {
		n := LeaseName(o)
		if errs := validation.IsDNS1123Subdomain(n); len(errs) > 0 {
			t.Errorf("LeaseName(%q) = %q: %v", o, n, errs)
		}
		if n != LeaseName(o) {
			t.Errorf("LeaseName(%q) is not stable", o)
		}
		if other, dup := seen[n]; dup {
			t.Errorf("owners %q and %q share Lease %q", other, o, n)
		}
		seen[n] = o
	}
}
