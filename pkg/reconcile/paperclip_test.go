package reconcile

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/pcsync/pcsync/pkg/apply"
	"github.com/pcsync/pcsync/pkg/config"
	"github.com/pcsync/pcsync/pkg/health"
	"github.com/pcsync/pcsync/pkg/metrics"
	"github.com/pcsync/pcsync/pkg/paperclip"
)

// fakePaperclip answers every reconcile with err and counts the calls.
type fakePaperclip struct {
	calls int
	opts  paperclip.ReconcileOptions
	err   error
}

func (f *fakePaperclip) Reconcile(_ context.Context, _ *config.Model, ro paperclip.ReconcileOptions) (*paperclip.Report, error) {
	f.calls++
	f.opts = ro
	rep := &paperclip.Report{Companies: []paperclip.CompanyResult{{Slug: "acme", ID: "id-acme", Err: f.err}}}
	return rep, nil
}

const managedSettings = "apiVersion: pcsync.io/v1alpha1\nkind: Settings\nmetadata: {name: s}\nspec:\n  paperclip: {url: \"http://p:3100\", spoolDir: /spool}\n"
const managedCompany = "apiVersion: pcsync.io/v1alpha1\nkind: Company\nmetadata: {name: acme}\nspec:\n  id: id-acme\n  paperclip: {manage: true}\n  agents: [{name: coder, adapter: claude_local}]\n"

// TestPaperclipSide: the loop runs the Paperclip side after the apply, and
// without an Applier too (--kubernetes=false, --executor local); its failure
// is stage paperclip, never an apply failure, and is retried.
func TestPaperclipSide(t *testing.T) {
	for _, withApplier := range []bool{true, false} {
		dir := t.TempDir()
		write(t, filepath.Join(dir, "settings.yaml"), managedSettings)
		write(t, filepath.Join(dir, "acme.yaml"), managedCompany)
		o := DefaultOptions(dir)
		o.Watch = false
		o.Logger = slog.New(slog.DiscardHandler)
		o.Metrics, o.Health = metrics.New(), health.NewChecker()
		pc := &fakePaperclip{err: errors.New("paperclip company acme (id id-acme): list agents failed: down")}
		o.Paperclip = pc
		fa := &fakeApplier{action: apply.ActionCreated}
		var a Applier
		if withApplier {
			a = fa
		}
		l, err := New(a, o)
		if err != nil {
			t.Fatal(err)
		}
		out := l.ReconcileOnce(context.Background())
		if pc.calls != 1 {
			t.Fatalf("applier %v: Paperclip side called %d times", withApplier, pc.calls)
		}
		if withApplier && len(fa.calls) != 1 {
			t.Errorf("the Kubernetes side was not applied")
		}
		if out.FailedStage != StagePaperclip || out.PaperclipErr == nil || !retryable(out) {
			t.Errorf("applier %v: stage %q, err %v, retryable %v", withApplier, out.FailedStage, out.PaperclipErr, retryable(out))
		}
		if got := testutil.ToFloat64(o.Metrics.ReconcileErrors.WithLabelValues("paperclip")); got != 1 {
			t.Errorf("applier %v: pcsync_reconcile_errors_total{stage=paperclip} = %v", withApplier, got)
		}
		if pc.opts.PauseMax.String() != "25%" || pc.opts.PauseFloor != 3 {
			t.Errorf("pause guard options %+v, want the prune limit 25%% and floor 3", pc.opts)
		}
		if l.Model() == nil {
			t.Errorf("applier %v: the model was not published", withApplier)
		}
	}
}
