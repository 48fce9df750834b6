package doctor

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pcsync/pcsync/internal/lib/safefile"
	"github.com/pcsync/pcsync/pkg/runs"
	"github.com/pcsync/pcsync/pkg/runs/spool"
)

// TestDoctorDaemon: the daemon row from the spool's status file: a live
// daemon (fresh heartbeat, lock held) is ok and named; a heartbeat long
// past fails; no status file warns.
func TestDoctorDaemon(t *testing.T) {
	spoolDir := t.TempDir()
	state := runs.DefaultStateDir(spoolDir)
	if err := os.MkdirAll(state, 0o700); err != nil {
		t.Fatal(err)
	}
	row := func() (Status, string) {
		t.Helper()
		opts := DefaultOptions()
		opts.Spool, opts.ClusterError = spoolDir, os.ErrNotExist
		r := Run(context.Background(), opts)
		for _, c := range r.Checks {
			if c.Area == "daemon" {
				return c.Status, c.Detail
			}
		}
		t.Fatal("no daemon row")
		return "", ""
	}
	if st, detail := row(); st != StatusWarn || !strings.Contains(detail, "no status file") {
		t.Errorf("no status file: %s %q", st, detail)
	}
	lock, err := safefile.TryLock(filepath.Join(state, "daemon.lock"), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Unlock()
	write := func(beat time.Time) {
		t.Helper()
		b, _ := json.Marshal(spool.Status{APIVersion: "pcsync.io/v1alpha1", Kind: spool.StatusKind, Version: "v1.2.3", PID: 7,
			Executor: "local", HeartbeatAt: &beat, HeartbeatIntervalSec: 10,
			Companies: []spool.StatusCompany{{Slug: "acme", ID: "co-1"}}})
		if err := os.WriteFile(filepath.Join(state, "status.json"), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(time.Now())
	if st, detail := row(); st != StatusOK || !strings.Contains(detail, "pid 7, local executor, version v1.2.3, companies: acme") {
		t.Errorf("live daemon: %s %q", st, detail)
	}
	write(time.Now().Add(-time.Hour))
	if st, detail := row(); st != StatusFail || !strings.Contains(detail, "it is stuck") {
		t.Errorf("stuck daemon: %s %q", st, detail)
	}
}
