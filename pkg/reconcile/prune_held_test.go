package reconcile

import (
	"bytes"
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/pcsync/pcsync/pkg/apply"
	"github.com/pcsync/pcsync/pkg/health"
	"github.com/pcsync/pcsync/pkg/metrics"
)

// holdingApplier answers every apply with its hold (nil: nothing held).
type holdingApplier struct{ hold *apply.PruneHold }

func (h *holdingApplier) Apply(_ context.Context, objs []*unstructured.Unstructured, opts apply.ApplyOptions) (*apply.ChangeSet, error) {
	r := &apply.ChangeSet{Parent: apply.ObjectRef{Version: "v1", Kind: "Secret", Namespace: "paperclip", Name: "pcsync"},
		PruneHeld: h.hold}
	for _, o := range objs {
		r.Objects = append(r.Objects, apply.Change{Ref: apply.RefOf(o), Action: apply.ActionUnchanged})
	}
	if !opts.HoldPrune {
		panic("the daemon's loop must hold prunes, not refuse them")
	}
	return r, nil
}

// TestLoopReportsAHeldPrune: a prune the guard holds is impossible to miss
// (metric, /readyz condition, an ERROR line with the approval command) and
// goes away once nothing is held.
func TestLoopReportsAHeldPrune(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "acme.yaml"), company("acme"))
	var logs bytes.Buffer
	hold := &apply.PruneHold{Reason: apply.HoldOverLimit, Tenants: []string{"paperclip-b", "paperclip-c"}, Fleet: 4,
		Limit: 1, Objects: 16, Token: "0123456789abcdef", PruneMax: "25%", PruneFloor: 1}
	fa := &holdingApplier{hold: hold}
	o := DefaultOptions(dir)
	o.Watch = false
	o.Apply.Prune = true
	o.Metrics, o.Health = metrics.New(), health.NewChecker()
	o.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	l, err := New(fa, o)
	if err != nil {
		t.Fatal(err)
	}
	out := l.ReconcileOnce(context.Background())
	if out.Err != nil {
		t.Fatalf("a held prune is not a failed reconcile: %v", out.Err)
	}
	if got := testutil.ToFloat64(o.Metrics.PruneBlocked); got != 2 {
		t.Errorf("pcsync_prune_blocked = %v, want 2", got)
	}
	rep := o.Health.Report()
	if rep.Status != health.StateDegraded {
		t.Errorf("readyz status = %s, want degraded", rep.Status)
	}
	approve := "kubectl annotate secret pcsync -n paperclip pcsync.io/approve-prune=0123456789abcdef --overwrite"
	var cond *health.Condition
	for i, c := range rep.Conditions {
		if c.Type == CondPruneAllowed {
			cond = &rep.Conditions[i]
		}
	}
	if cond == nil || cond.Status != health.StatusFalse || cond.Reason != "PruneHeld" || !strings.Contains(cond.Message, approve) {
		t.Errorf("PruneAllowed condition = %+v, want False/PruneHeld naming %q", cond, approve)
	}
	if !strings.Contains(logs.String(), "level=ERROR msg=\"prune held by the prune guard: it would remove 2 of the fleet's 4 tenants") ||
		!strings.Contains(logs.String(), approve) {
		t.Errorf("log does not say the prune is held and how to approve it:\n%s", logs.String())
	}

	fa.hold = nil
	logs.Reset()
	l.ReconcileOnce(context.Background())
	if got := testutil.ToFloat64(o.Metrics.PruneBlocked); got != 0 {
		t.Errorf("pcsync_prune_blocked = %v after approval, want 0", got)
	}
	if rep := o.Health.Report(); rep.Status != health.StateReady {
		t.Errorf("readyz after approval = %+v", rep)
	}
	if !strings.Contains(logs.String(), "no longer held") {
		t.Errorf("log after approval:\n%s", logs.String())
	}
}
