package apply

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestWaitOptionsComplete(t *testing.T) {
	tests := []struct {
		name string
		in   WaitOptions
		want WaitOptions
	}{
		{name: "zero value", in: WaitOptions{}, want: DefaultWaitOptions()},
		{name: "negative", in: WaitOptions{Interval: -1, Timeout: -1}, want: DefaultWaitOptions()},
		{name: "given", in: WaitOptions{Interval: time.Second, Timeout: time.Minute},
			want: WaitOptions{Interval: time.Second, Timeout: time.Minute}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.in
			got.complete()
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("complete (-want +got):\n%s", diff)
			}
		})
	}
	if d := DefaultWaitOptions(); d.Interval != 500*time.Millisecond || d.Timeout != 2*time.Minute {
		t.Errorf("DefaultWaitOptions = %+v, want 500ms and 2m", d)
	}
}
