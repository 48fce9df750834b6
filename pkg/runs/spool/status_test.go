package spool

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/pcsync/pcsync/pkg/config"
	"github.com/pcsync/pcsync/pkg/runs"
)

// TestStatusFileHeartbeat: the status file names the daemon, its
// companies with their agents (updated by SetModel), and a heartbeat that
// is refreshed while nothing happens; once the daemon stops, it is marked
// stopped and `runs list` says no daemon runs.
func TestStatusFileHeartbeat(t *testing.T) {
	h := newHarness(t, "")
	o := h.options(false)
	o.HeartbeatInterval = 200 * time.Millisecond
	o.Version = "v9.9.9-test"
	d, err := New(h.model, h.executor(), o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	path := runs.Layout{Dir: h.state}.StatusFile()
	read := func() Status {
		t.Helper()
		st, ok, err := ReadStatus(path)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			return Status{}
		}
		return st
	}
	h.waitFor("the status file", func() bool { return read().HeartbeatAt != nil })
	first := read()
	wantCompanies := []StatusCompany{{Slug: "acme", ID: "co-acme-1", Agents: []StatusAgent{
		{"coder", "claude_local"}, {"failer", "claude_local"}, {"slow", "claude_local"}, {"stubborn", "claude_local"}}}}
	got := []any{first.APIVersion, first.Kind, first.Version, first.PID, first.Executor, first.HeartbeatIntervalSec, first.Companies}
	want := []any{"pcsync.io/v1alpha1", "DaemonStatus", "v9.9.9-test", os.Getpid(), "local", 1, wantCompanies}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("status file (-want +got):\n%s", diff)
	}
	if first.StartedAt == nil || first.StoppedAt != nil || !first.Alive(time.Now()) {
		t.Errorf("status file: startedAt %v stoppedAt %v, alive %v", first.StartedAt, first.StoppedAt, first.Alive(time.Now()))
	}
	// Nothing happens; the heartbeat moves on.
	h.waitFor("a later heartbeat", func() bool { return read().HeartbeatAt.After(*first.HeartbeatAt) })

	l, err := ListRuns(h.spool, h.state)
	if err != nil {
		t.Fatal(err)
	}
	if !l.DaemonRunning || l.Daemon == nil || !strings.HasPrefix(l.DaemonState, "running, heartbeat ") {
		t.Errorf("runs list: running %v, state %q", l.DaemonRunning, l.DaemonState)
	}

	// A new config: its companies replace the old ones in the file.
	dir2 := filepath.Join(h.dir, "config2")
	if err := os.MkdirAll(dir2, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := "apiVersion: pcsync.io/v1alpha1\nkind: Company\nmetadata: {name: globex}\nspec:\n  id: co-globex-2\n  agents:\n  - {name: reviewer, adapter: codex_local}\n"
	if err := os.WriteFile(filepath.Join(dir2, "c.yaml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	m2, err := config.Load(context.Background(), dir2, config.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	d.SetModel(m2)
	wantCompanies = []StatusCompany{{Slug: "globex", ID: "co-globex-2", Agents: []StatusAgent{{"reviewer", "codex_local"}}}}
	h.waitFor("the new companies in the status file", func() bool { return cmp.Equal(wantCompanies, read().Companies) })

	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if st := read(); st.StoppedAt == nil || st.Alive(time.Now()) {
		t.Errorf("after the stop: stoppedAt %v, alive %v", st.StoppedAt, st.Alive(time.Now()))
	}
	l, err = ListRuns(h.spool, h.state)
	if err != nil {
		t.Fatal(err)
	}
	if l.DaemonRunning || !strings.HasPrefix(l.DaemonState, "not running: stopped ") {
		t.Errorf("runs list after the stop: running %v, state %q", l.DaemonRunning, l.DaemonState)
	}
}

// TestDaemonLiveness covers the status files `runs list` may find: an
// older daemon's (no heartbeat), a fresh one, a stale one, a stopped one,
// with and without the lock held.
func TestDaemonLiveness(t *testing.T) {
	now := time.Date(2026, 11, 23, 15, 0, 0, 0, time.UTC)
	at := func(ago time.Duration) *time.Time { v := now.Add(-ago); return &v }
	fresh := Status{HeartbeatAt: at(5 * time.Second), HeartbeatIntervalSec: 10}
	stale := Status{HeartbeatAt: at(45 * time.Second), HeartbeatIntervalSec: 10}
	stopped := Status{HeartbeatAt: at(5 * time.Second), HeartbeatIntervalSec: 10, StoppedAt: at(5 * time.Second)}
	tests := []struct {
		name    string
		st      Status
		ok      bool
		locked  bool
		running bool
		state   string
	}{
		{"no status, no lock", Status{}, false, false, false, "not running (no status file)"},
		{"older file, lock held", Status{PID: 1}, true, true, true, "running (its status file has no heartbeat)"},
		{"older file, no lock", Status{PID: 1}, true, false, false, "not running"},
		{"fresh, lock held", fresh, true, true, true, "running, heartbeat 5s ago"},
		{"fresh, lock free", fresh, true, false, false, "not running: its heartbeat is 5s old but no process holds the spool's lock (it ended without stopping)"},
		{"stale, lock free", stale, true, false, false, "not running: last heartbeat 45s ago"},
		{"stale, lock held", stale, true, true, false, "not running: a process holds the spool's lock but its last heartbeat is 45s old (more than 3 intervals of 10s); it is stuck"},
		{"stopped", stopped, true, false, false, "not running: stopped 5s ago"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			layout := runs.Layout{Dir: t.TempDir()}
			if tc.locked {
				unlock, err := lockState(layout.Lock())
				if err != nil {
					t.Fatal(err)
				}
				defer unlock()
			}
			running, state := liveness(layout, tc.st, tc.ok, now)
			if diff := cmp.Diff([]any{tc.running, tc.state}, []any{running, state}); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
