package sandbox

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/pcsync/pcsync/pkg/sandbox/leasepod"
)

// recorder is a Metrics that records its calls as lines.
type recorder struct{ calls []string }

func (r *recorder) SandboxLeases(company string, delta int) {
	r.calls = append(r.calls, fmt.Sprintf("leases %s %+d", company, delta))
}
func (r *recorder) SandboxAcquire(_ time.Duration, outcome, code string) {
	r.calls = append(r.calls, fmt.Sprintf("acquire %s %q", outcome, code))
}
func (r *recorder) SandboxRelease(reason string) { r.calls = append(r.calls, "release "+reason) }
func (r *recorder) SandboxExecute(company string, _ time.Duration, outcome string) {
	r.calls = append(r.calls, fmt.Sprintf("execute %s %s", company, outcome))
}
func (r *recorder) SandboxStreamReopen() { r.calls = append(r.calls, "reopen") }
func (r *recorder) SandboxEnvKeysKept(company string, n int) {
	r.calls = append(r.calls, fmt.Sprintf("kept %s %d", company, n))
}
func (r *recorder) SandboxKeysReplaced(company string, n int) {
	r.calls = append(r.calls, fmt.Sprintf("replaced %s %d", company, n))
}
func (r *recorder) SandboxSync(company, direction, outcome string, n int) {
	r.calls = append(r.calls, fmt.Sprintf("sync %s %s %s %d", company, direction, outcome, n))
}
func (r *recorder) SandboxPool(company string, declared, members, ready int) {
	r.calls = append(r.calls, fmt.Sprintf("pool %s %d %d %d", company, declared, members, ready))
}
func (r *recorder) SandboxPoolClaim(company, outcome string) {
	r.calls = append(r.calls, fmt.Sprintf("claim %s %s", company, outcome))
}
func (r *recorder) SandboxPrestart(company, outcome string) {
	r.calls = append(r.calls, fmt.Sprintf("prestart %s %s", company, outcome))
}
func (r *recorder) SandboxPoolReady(company string, _ time.Duration) {
	r.calls = append(r.calls, "pool ready "+company)
}

func (r *recorder) SandboxPoolActing(acting bool) {
	r.calls = append(r.calls, fmt.Sprintf("pool acting %v", acting))
}

func (r *recorder) SandboxSuspend(company string, _ time.Duration, outcome string) {
	r.calls = append(r.calls, fmt.Sprintf("suspend %s %s", company, outcome))
}

func (r *recorder) SandboxResume(company string, _ time.Duration, outcome string) {
	r.calls = append(r.calls, fmt.Sprintf("resume %s %s", company, outcome))
}

func (r *recorder) SandboxSuspended(company string, delta int) {
	r.calls = append(r.calls, fmt.Sprintf("suspended %s %+d", company, delta))
}

func TestObserveAcquire(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"ready", nil, `acquire ready ""`},
		{"refused for quota", fmt.Errorf("acquire: %w", &UserError{Code: "quota_full", Message: "at quota"}), `acquire refused "quota_full"`},
		{"failed", errors.New("Pod/ns/p: create: connection refused"), `acquire failed ""`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &recorder{}
			m := &Manager{opts: Options{Metrics: r}}
			m.observeAcquire(time.Now(), tt.err)
			if diff := cmp.Diff([]string{tt.want}, r.calls); diff != "" {
				t.Errorf("calls (-want +got):\n%s", diff)
			}
		})
	}
}

// TestHoldUnhold: a lease counts as held once, and its end and the
// manager's Close together take it off once.
func TestHoldUnhold(t *testing.T) {
	r := &recorder{}
	m := &Manager{opts: Options{Metrics: r}}
	l := &lease{Record: leasepod.Record{ID: "pcsync-sbx-0123456789", Company: "acme"}}
	m.hold(l)
	m.unhold(l)
	m.unhold(l)
	if diff := cmp.Diff([]string{"leases acme +1", "leases acme -1"}, r.calls); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
}

// TestDefaultMetrics: a manager given no Metrics reports to none.
func TestDefaultMetrics(t *testing.T) {
	o := Options{StateDir: t.TempDir()}
	o.complete()
	if _, ok := o.Metrics.(noMetrics); !ok {
		t.Errorf("Metrics = %T, want noMetrics", o.Metrics)
	}
}
