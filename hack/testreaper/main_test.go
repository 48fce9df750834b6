package main

import (
	"strings"
	"testing"
	"time"
)

// TestRun runs real commands under the reaper: one that leaves nothing, one
// that leaves a detached process (in a session of its own, as a spawned
// command server is), one that leaves a process which ends within the grace
// period, and one that fails.
func TestRun(t *testing.T) {
	for _, tc := range []struct {
		name       string
		script     string
		wantStatus int
		wantOut    string
	}{
		{"nothing left", "echo ok", 0, ""},
		{"detached left", "setsid sleep 300 & exit 0", 1, "sleep 300"},
		{"ends in grace", "sleep 0.2 & exit 0", 0, ""},
		{"fails", "exit 3", 3, ""},
		{"fails and leaves", "sleep 301 & exit 4", 4, "sleep 301"},
		// An orphan that ends while the command runs is reaped at once, as
		// init would: kill -0 finds no zombie of it.
		{"orphan reaped at once", "pid=$(sh -c 'sleep 0.1 >/dev/null & echo $!'); sleep 0.5; kill -0 $pid 2>/dev/null && exit 9; exit 0", 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out strings.Builder
			got := run([]string{"bash", "-c", tc.script}, time.Second, &out)
			if got != tc.wantStatus {
				t.Errorf("status %d, want %d (stderr %q)", got, tc.wantStatus, out.String())
			}
			if tc.wantOut == "" && out.Len() > 0 || !strings.Contains(out.String(), tc.wantOut) {
				t.Errorf("stderr %q, want it to name %q", out.String(), tc.wantOut)
			}
			if left := children(); len(left) > 0 {
				t.Errorf("still running after run: %v", left)
			}
		})
	}
}
