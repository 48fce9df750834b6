package metrics

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestSandbox: each sandbox method moves its series; a lease taken off
// again leaves its company's gauge at 0; the fixed reasons exist at 0.
func TestSandbox(t *testing.T) {
	m := New()
	m.SandboxLeases("acme", 1)
	m.SandboxLeases("acme", 1)
	m.SandboxLeases("acme", -1)
	m.SandboxLeases("globex", 1)
	m.SandboxLeases("globex", -1)
	m.SandboxAcquire(2*time.Second, "ready", "")
	m.SandboxAcquire(time.Millisecond, "refused", "quota_full")
	m.SandboxRelease("drained")
	m.SandboxRelease("expired")
	m.SandboxExecute("acme", 300*time.Millisecond, "completed")
	m.SandboxStreamReopen()
	m.SandboxEnvKeysKept("acme", 3)
	m.SandboxSync("acme", "in", "completed", 2048)
	m.SandboxSync("acme", "out", "failed", 0)

	want := `
# HELP pcsync_sandbox_leases_active Sandbox leases this daemon holds (a pod each), by company.
# TYPE pcsync_sandbox_leases_active gauge
pcsync_sandbox_leases_active{company="acme"} 1
pcsync_sandbox_leases_active{company="globex"} 0
# HELP pcsync_sandbox_acquire_refusals_total Lease acquires refused with a reason the user can fix, by its code (quota_full, image_not_allowed, …).
# TYPE pcsync_sandbox_acquire_refusals_total counter
pcsync_sandbox_acquire_refusals_total{code="quota_full"} 1
# HELP pcsync_sandbox_releases_total Ended sandbox leases, by how they ended (drained, cancelled, expired, failed, adopted, unclaimed).
# TYPE pcsync_sandbox_releases_total counter
pcsync_sandbox_releases_total{reason="adopted"} 0
pcsync_sandbox_releases_total{reason="cancelled"} 0
pcsync_sandbox_releases_total{reason="drained"} 1
pcsync_sandbox_releases_total{reason="expired"} 1
pcsync_sandbox_releases_total{reason="failed"} 0
pcsync_sandbox_releases_total{reason="unclaimed"} 0
# HELP pcsync_sandbox_executes_total Commands run on sandbox leases, by company and outcome (completed: it has an exit status; failed: none).
# TYPE pcsync_sandbox_executes_total counter
pcsync_sandbox_executes_total{company="acme",outcome="completed"} 1
# HELP pcsync_sandbox_stream_reopens_total Lease command streams (pod execs) that broke and were reopened with their commands resumed.
# TYPE pcsync_sandbox_stream_reopens_total counter
pcsync_sandbox_stream_reopens_total 1
# HELP pcsync_sandbox_env_keys_kept_total Env keys of executes kept from the lease pods by the env rule (a count; the names are logged once per lease, values never), by company.
# TYPE pcsync_sandbox_env_keys_kept_total counter
pcsync_sandbox_env_keys_kept_total{company="acme"} 3
# HELP pcsync_sandbox_syncs_total Native workspace sync mappings moved to (in) or from (out) lease pods, by company, direction and outcome (completed, failed).
# TYPE pcsync_sandbox_syncs_total counter
pcsync_sandbox_syncs_total{company="acme",direction="in",outcome="completed"} 1
pcsync_sandbox_syncs_total{company="acme",direction="out",outcome="failed"} 1
# HELP pcsync_sandbox_sync_bytes_total Bytes of native workspace sync mappings moved to (in) or from (out) lease pods, by company and direction.
# TYPE pcsync_sandbox_sync_bytes_total counter
pcsync_sandbox_sync_bytes_total{company="acme",direction="in"} 2048
pcsync_sandbox_sync_bytes_total{company="acme",direction="out"} 0
`
	if err := testutil.GatherAndCompare(m.Registry, strings.NewReader(want),
		"pcsync_sandbox_leases_active", "pcsync_sandbox_acquire_refusals_total", "pcsync_sandbox_releases_total",
		"pcsync_sandbox_executes_total", "pcsync_sandbox_stream_reopens_total", "pcsync_sandbox_env_keys_kept_total",
		"pcsync_sandbox_syncs_total", "pcsync_sandbox_sync_bytes_total"); err != nil {
		t.Error(err)
	}
	if got := testutil.CollectAndCount(m.sandbox.acquireDuration); got != 3 {
		t.Errorf("acquire duration series = %d, want 3 (ready, refused, failed)", got)
	}
	if got := testutil.CollectAndCount(m.sandbox.executeDuration); got != 1 {
		t.Errorf("execute duration series = %d, want 1", got)
	}
	if diff := cmp.Diff(1.0, testutil.ToFloat64(m.sandbox.reopens)); diff != "" {
		t.Errorf("reopens (-want +got):\n%s", diff)
	}
}
