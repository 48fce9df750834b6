package imagecheck

import (
	"testing"
	"time"
)

// TestOptionsComplete: a zero or negative Timeout or Concurrency takes its
// default; a positive one is kept.
func TestOptionsComplete(t *testing.T) {
	d := DefaultOptions()
	for _, tc := range []struct {
		name        string
		in          Options
		timeout     time.Duration
		concurrency int
	}{
		{"zero", Options{}, d.Timeout, d.Concurrency},
		{"negative", Options{Timeout: -time.Second, Concurrency: -1}, d.Timeout, d.Concurrency},
		{"set", Options{Timeout: time.Second, Concurrency: 2}, time.Second, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := tc.in
			o.complete()
			if o.Timeout != tc.timeout || o.Concurrency != tc.concurrency {
				t.Errorf("complete() = Timeout %v, Concurrency %d; want %v, %d", o.Timeout, o.Concurrency, tc.timeout, tc.concurrency)
			}
			if o.Keychain == nil || o.Transport == nil {
				t.Errorf("complete() left Keychain %v or Transport %v nil", o.Keychain, o.Transport)
			}
		})
	}
}
