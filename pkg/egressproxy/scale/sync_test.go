package scale

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestDecide(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		s    state
		want decision
	}{
		{"busy scales up", state{current: 0, busy: true, idle: time.Minute, since: now}, decision{replicas: 1, reason: "busy"}},
		{"busy stays up", state{current: 1, busy: true, idle: time.Minute, since: now}, decision{replicas: 1, reason: "busy"}},
		{"idle 0 never sleeps", state{current: 1, idle: 0, since: now.Add(-time.Hour)}, decision{replicas: 1, reason: "never idle"}},
		{"idle 0 wakes a sleeping proxy", state{current: 0, idle: 0, since: now.Add(-time.Hour)}, decision{replicas: 1, reason: "never idle"}},
		{"asleep stays asleep", state{current: 0, idle: time.Minute, since: now.Add(-time.Hour)}, decision{replicas: 0, reason: "idle"}},
		{"asleep stays asleep, idle just begun", state{current: 0, idle: time.Minute, since: now}, decision{replicas: 0, reason: "idle"}},
		{"idle less than its period", state{current: 1, idle: time.Minute, since: now.Add(-20 * time.Second)},
			decision{replicas: 1, after: 40 * time.Second, reason: "idle for less than its period"}},
		{"idle for its period", state{current: 1, idle: time.Minute, since: now.Add(-time.Minute)}, decision{replicas: 0, reason: "idle for its period"}},
		{"idle past its period", state{current: 1, idle: time.Minute, since: now.Add(-time.Hour)}, decision{replicas: 0, reason: "idle for its period"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, decide(tt.s, now), cmp.AllowUnexported(decision{})); diff != "" {
				t.Errorf("decide (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLastBusy(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	c := &Controller{busy: map[string]mark{}}
	steps := []struct {
		at   time.Duration
		busy bool
		want time.Duration
	}{
		{0, false, 0},                                             // first seen: idle since now
		{time.Minute, false, 0},                                   // still idle since then
		{2 * time.Minute, true, 2 * time.Minute},                  // busy: now
		{time.Hour, true, time.Hour},                              // a long run: now
		{time.Hour + time.Second, false, time.Hour + time.Second}, // its end: idle from now, not from its start
		{2 * time.Hour, false, time.Hour + time.Second},
	}
	for i, s := range steps {
		if got := c.lastBusy("ns", t0.Add(s.at), s.busy); !got.Equal(t0.Add(s.want)) {
			t.Errorf("step %d (at %s, busy %v): last busy %s, want %s", i, s.at, s.busy, got.Sub(t0), s.want)
		}
	}
}
