package statusctl

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pcsync/pcsync/pkg/apply"
	cs "github.com/pcsync/pcsync/pkg/companystatus"
	"github.com/pcsync/pcsync/pkg/config"
	"github.com/pcsync/pcsync/pkg/paperclip"
	"github.com/pcsync/pcsync/pkg/reconcile"
)

func loadFleet(t *testing.T) *config.Model {
	t.Helper()
	dir := t.TempDir()
	docs := map[string]string{
		"acme.yaml":    "apiVersion: pcsync.io/v1alpha1\nkind: Company\nmetadata: {name: acme}\nspec:\n  id: a\n  agents: []\n",
		"globex.yaml":  "apiVersion: pcsync.io/v1alpha1\nkind: Company\nmetadata: {name: globex}\nspec:\n  id: g\n  suspend: true\n  agents: []\n",
		"initech.yaml": "apiVersion: pcsync.io/v1alpha1\nkind: Company\nmetadata: {name: initech, labels: {pcsync.io/shard: blue}}\nspec:\n  id: i\n  agents: []\n",
	}
	for n, b := range docs {
		if err := os.WriteFile(filepath.Join(dir, n), []byte(b), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	m, err := config.Load(context.Background(), dir, config.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// brief is what TestIntents compares of an intent.
type brief struct {
	Ready               metav1.ConditionStatus
	Reason, Message     string
	Retrying, Stalled   bool
	Revision, Attempted string
	Suspended           bool
}

// TestIntents: a reconcile's outcome gives each company of the shard
// (not another shard's) its Ready condition and revisions: applied, its
// own objects failed (retried), the whole apply failed, an invalid config
// (stalled, no revision applied, for a suspended company too), Paperclip
// unreachable (no company opts in: none failed); a suspended company
// says so whatever the rest did.
func TestIntents(t *testing.T) {
	m := loadFleet(t)
	objFail := &apply.ChangeSet{Objects: []apply.Change{{Ref: apply.ObjectRef{Version: "v1", Kind: "ResourceQuota",
		Namespace: "paperclip-acme", Name: "paperclip-quota"}, Action: apply.ActionFailed, Err: errors.New("quota refused")}}}
	down := errors.New("connection refused")
	suspended := brief{Ready: "False", Reason: cs.ReasonSuspended, Attempted: "r2", Suspended: true,
		Message: "suspended in the config (spec.suspend): nothing is applied or pruned, no new run or lease starts"}
	tests := []struct {
		name string
		out  reconcile.Outcome
		acme brief
		// globex, suspended: suspended unless said here.
		globex *brief
	}{
		{"applied", reconcile.Outcome{Model: m, Revision: "r2", Report: &apply.ChangeSet{}},
			brief{Ready: "True", Reason: cs.ReasonSucceeded, Message: "applied revision r2", Revision: "r2", Attempted: "r2"}, nil},
		{"its objects failed", reconcile.Outcome{Model: m, Revision: "r2", Report: objFail, FailedStage: reconcile.StageApply,
			Err: errors.New("1 object failed")},
			brief{Ready: "False", Reason: cs.ReasonFailed, Message: "quota refused", Retrying: true, Attempted: "r2"}, nil},
		{"the apply failed", reconcile.Outcome{Model: m, Revision: "r2", FailedStage: reconcile.StageApply, Err: down},
			brief{Ready: "False", Reason: cs.ReasonFailed, Message: "connection refused", Retrying: true, Attempted: "r2"}, nil},
		{"invalid config", reconcile.Outcome{Revision: "r2", FailedStage: reconcile.StageLoad, Err: errors.New("invalid"),
			ConfigErrors: []string{"acme.yaml:3:5: spec.id: required"}},
			brief{Ready: "False", Reason: cs.ReasonConfigInvalid, Message: "acme.yaml:3:5: spec.id: required", Stalled: true, Attempted: "r2"},
			&brief{Ready: "False", Reason: cs.ReasonConfigInvalid, Message: "acme.yaml:3:5: spec.id: required", Stalled: true, Attempted: "r2", Suspended: true}},
		{"Paperclip unreachable", reconcile.Outcome{Model: m, Revision: "r2", Report: &apply.ChangeSet{},
			FailedStage: reconcile.StagePaperclip, Err: paperclip.ErrUnreachable, PaperclipErr: paperclip.ErrUnreachable},
			brief{Ready: "True", Reason: cs.ReasonSucceeded, Message: "applied revision r2", Revision: "r2", Attempted: "r2"}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := map[string]brief{}
			for name, in := range intents(tc.out, m, "") {
				got[name] = brief{in.ready, in.reason, in.message, in.retrying, in.stalled, in.revision, in.attempted, in.suspended}
			}
			want := map[string]brief{"acme": tc.acme, "globex": suspended}
			if tc.globex != nil {
				want["globex"] = *tc.globex
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("intents (-want +got):\n%s", diff)
			}
		})
	}
}

// TestMerge: what an intent leaves zero is the object's; a condition
// whose status holds keeps its lastTransitionTime, a revision its
// lastAppliedAt; Reconciling and Stalled are there only while True.
func TestMerge(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC))
	t1 := time.Date(2026, 11, 2, 10, 0, 0, 0, time.UTC)
	now := metav1.NewTime(t1)
	cur := &cs.CompanyStatus{Status: cs.Status{ObservedGeneration: 1, Revision: "r1", LastAttemptedRevision: "r1", LastAppliedAt: &t0,
		LastHandledReconcileAt: "req-1", Conditions: []metav1.Condition{{Type: cs.ConditionReady, Status: "True",
			Reason: cs.ReasonSucceeded, Message: "applied revision r1", LastTransitionTime: t0, ObservedGeneration: 1}}}}
	tests := []struct {
		name string
		in   intent
		want cs.Status
	}{
		{"the same revision again", intent{ready: "True", reason: cs.ReasonSucceeded, message: "applied revision r1", revision: "r1", attempted: "r1"},
			cur.Status},
		{"a new revision", intent{ready: "True", reason: cs.ReasonSucceeded, message: "applied revision r2", revision: "r2", attempted: "r2", handled: "req-2"},
			cs.Status{ObservedGeneration: 1, Revision: "r2", LastAttemptedRevision: "r2", LastAppliedAt: &now, LastHandledReconcileAt: "req-2",
				Conditions: []metav1.Condition{{Type: cs.ConditionReady, Status: "True", Reason: cs.ReasonSucceeded,
					Message: "applied revision r2", LastTransitionTime: t0, ObservedGeneration: 1}}}},
		{"a failure, retried", intent{ready: "False", reason: cs.ReasonFailed, message: "boom", attempted: "r2", retrying: true},
			cs.Status{ObservedGeneration: 1, Revision: "r1", LastAttemptedRevision: "r2", LastAppliedAt: &t0, LastHandledReconcileAt: "req-1",
				Conditions: []metav1.Condition{
					{Type: cs.ConditionReady, Status: "False", Reason: cs.ReasonFailed, Message: "boom", LastTransitionTime: now, ObservedGeneration: 1},
					{Type: cs.ConditionReconciling, Status: "True", Reason: cs.ReasonRetrying, Message: "boom", LastTransitionTime: now, ObservedGeneration: 1}}}},
	}
	got, want := map[string]cs.Status{}, map[string]cs.Status{}
	for _, tc := range tests {
		got[tc.name], want[tc.name] = merge(cur, tc.in, 1, t1), tc.want
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("merged statuses (-want +got):\n%s", diff)
	}
	if !sameStatus(merge(cur, tests[0].in, 1, t1), cur.Status) {
		t.Error("the same revision again is a change")
	}
}

// TestEvent: an Event is recorded when the Ready reason changes, a failure's
// message changes, or a new revision is applied; never for the same status.
func TestEvent(t *testing.T) {
	status := func(ready metav1.ConditionStatus, reason, msg, rev string) cs.Status {
		return cs.Status{Revision: rev, Conditions: []metav1.Condition{{Type: cs.ConditionReady, Status: ready, Reason: reason, Message: msg}}}
	}
	ok1 := status("True", cs.ReasonSucceeded, "applied revision r1", "r1")
	failed := status("False", cs.ReasonFailed, "boom", "r1")
	type ev struct {
		Reason  string
		Warning bool
	}
	tests := []struct {
		name string
		old  *cs.CompanyStatus
		st   cs.Status
		want ev
	}{
		{"first", nil, ok1, ev{cs.ReasonSucceeded, false}},
		{"the same", &cs.CompanyStatus{Status: ok1}, ok1, ev{}},
		{"a new revision", &cs.CompanyStatus{Status: ok1}, status("True", cs.ReasonSucceeded, "applied revision r2", "r2"), ev{cs.ReasonSucceeded, false}},
		{"a failure", &cs.CompanyStatus{Status: ok1}, failed, ev{cs.ReasonFailed, true}},
		{"the same failure", &cs.CompanyStatus{Status: failed}, failed, ev{}},
		{"another failure", &cs.CompanyStatus{Status: failed}, status("False", cs.ReasonFailed, "bang", "r1"), ev{cs.ReasonFailed, true}},
		{"suspended", &cs.CompanyStatus{Status: ok1}, status("False", cs.ReasonSuspended, "suspended", "r1"), ev{cs.ReasonSuspended, false}},
	}
	got, want := map[string]ev{}, map[string]ev{}
	for _, tc := range tests {
		r, _, w := event(tc.old, tc.st)
		got[tc.name], want[tc.name] = ev{r, w}, tc.want
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}
