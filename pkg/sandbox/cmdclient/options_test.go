package cmdclient

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestReconnectBackoff: the waits before each attempt to reopen a broken
// stream: Backoff, doubling to MaxBackoff, then MaxBackoff for ever; a
// MaxBackoff below Backoff is raised.
func TestReconnectBackoff(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		name string
		opts Options
		want []time.Duration
	}{
		{"defaults", Options{}, []time.Duration{50 * ms, 100 * ms, 200 * ms, 400 * ms, 800 * ms, time.Second, time.Second, time.Second}},
		{"from 300ms", Options{Backoff: 300 * ms}, []time.Duration{300 * ms, 600 * ms, time.Second, time.Second}},
		{"to 250ms", Options{Backoff: 100 * ms, MaxBackoff: 250 * ms}, []time.Duration{100 * ms, 200 * ms, 250 * ms, 250 * ms}},
		{"max below backoff", Options{Backoff: 2 * time.Second, MaxBackoff: ms}, []time.Duration{2 * time.Second, 2 * time.Second, 2 * time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := tt.opts
			o.complete()
			next := o.reconnectBackoff().DelayFunc()
			var got []time.Duration
			for range tt.want {
				got = append(got, next())
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("waits (-want +got):\n%s", diff)
			}
		})
	}
}
