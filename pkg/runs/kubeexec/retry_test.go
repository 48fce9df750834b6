package kubeexec

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/wait"
)

// TestBackoffSchedules: the waits of untilAnswered (200 ms doubling to 5 s)
// and of Cancel's deletes (500 ms doubling to 30 s), each then at its cap
// for ever.
func TestBackoffSchedules(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		name string
		b    wait.Backoff
		want []time.Duration
	}{
		{"untilAnswered", retryBackoff, []time.Duration{200 * ms, 400 * ms, 800 * ms, 1600 * ms, 3200 * ms, 5 * time.Second, 5 * time.Second, 5 * time.Second}},
		{"Cancel", cancelBackoff, []time.Duration{500 * ms, time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second,
			30 * time.Second, 30 * time.Second, 30 * time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			next := tt.b.DelayFunc()
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

// TestRetry: try is called at once and after each wait until it is done,
// failed hears of each attempt that was not done with the wait after it; an
// attempt done with an error ends at once with it; the context's end stops
// the waits and joins its error with the last failure.
func TestRetry(t *testing.T) {
	b := wait.Backoff{Duration: time.Millisecond, Factor: 2, Steps: 100, Cap: 4 * time.Millisecond}
	refused, final := errors.New("refused"), errors.New("forbidden")
	type failure struct {
		Attempt int
		Err     string
		In      time.Duration
	}
	tests := []struct {
		name         string
		outcomes     []error // of each attempt; after the last, the context is cancelled
		doneOn       func(error) bool
		wantAttempts int
		wantErr      []error
		wantFailed   []failure
	}{
		{"done at once", []error{nil}, nil, 1, nil, nil},
		{"done after three failures", []error{refused, refused, refused, nil}, nil, 4, nil, []failure{
			{1, "refused", time.Millisecond}, {2, "refused", 2 * time.Millisecond}, {3, "refused", 4 * time.Millisecond}}},
		{"a final error ends at once", []error{refused, final}, func(err error) bool { return !errors.Is(err, refused) }, 2, []error{final},
			[]failure{{1, "refused", time.Millisecond}}},
		{"the context ends", []error{refused, refused}, nil, 2, []error{context.Canceled, refused}, []failure{
			{1, "refused", time.Millisecond}, {2, "refused", 2 * time.Millisecond}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := tt.doneOn
			if done == nil {
				done = func(err error) bool { return err == nil }
			}
			var failed []failure
			calls := 0
			attempts, err := retry(ctx, b, func() (bool, error) {
				err := tt.outcomes[calls]
				if calls++; calls == len(tt.outcomes) && !done(err) {
					cancel()
				}
				return done(err), err
			}, func(attempt int, err error, in time.Duration) {
				failed = append(failed, failure{attempt, err.Error(), in})
			})
			if attempts != tt.wantAttempts || attempts != calls {
				t.Errorf("retry: %d attempts (%d calls), want %d", attempts, calls, tt.wantAttempts)
			}
			for _, want := range tt.wantErr {
				if !errors.Is(err, want) {
					t.Errorf("retry: %v, want %v in it", err, want)
				}
			}
			if len(tt.wantErr) == 0 && err != nil {
				t.Errorf("retry: %v, want nil", err)
			}
			if diff := cmp.Diff(tt.wantFailed, failed); diff != "" {
				t.Errorf("failures heard (-want +got):\n%s", diff)
			}
		})
	}
}
