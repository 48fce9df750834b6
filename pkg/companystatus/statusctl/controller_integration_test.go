//go:build integration

package statusctl

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cs "github.com/pcsync/pcsync/pkg/companystatus"
	"github.com/pcsync/pcsync/pkg/reconcile"
)

// ready says a status is Ready at revision rev, as of its generation.
func ready(rev string) func(*cs.CompanyStatus) bool {
	return func(s *cs.CompanyStatus) bool {
		c := s.Status.Condition(cs.ConditionReady)
		return c != nil && c.Status == metav1.ConditionTrue && s.Status.Revision == rev &&
			s.Status.ObservedGeneration == s.Generation && c.ObservedGeneration == s.Generation
	}
}

// reason says a status's Ready condition has that reason.
func reason(r string) func(*cs.CompanyStatus) bool {
	return func(s *cs.CompanyStatus) bool {
		c := s.Status.Condition(cs.ConditionReady)
		return c != nil && c.Reason == r
	}
}

// TestStatusFollowsTheReconciles, on a real control plane, with the
// reconcile loop applying a git-sync checkout: each company's status says
// the commit applied (Ready, kstatus conditions, Events); reconciles that
// change nothing write nothing; a company whose apply fails says why
// while the others go on; a suspended company keeps its tenant as it was
// (nothing applied or pruned) and says so; a reconcile request is answered
// by a reconcile; a company removed is deleted from the statuses, but
// while the prune guard holds its tenant, when it says PruneHeld.
func TestStatusFollowsTheReconciles(t *testing.T) {
	k := newCheckout(t)
	h1 := k.commit(map[string]string{"acme": "", "globex": ""})
	r := newRig(t, k)
	_, n := r.reconciled(0, h1)
	for _, name := range []string{"acme", "globex"} {
		s := r.status(name, "Ready at "+h1, ready(h1))
		want := cs.Spec{Namespace: k.prefix + name, ID: "id-" + name}
		if s.Spec != want || s.Labels[cs.LabelOwner] == "" || s.Status.LastAppliedAt == nil || s.Status.LastAttemptedRevision != h1 {
			t.Errorf("status of %s: spec %+v labels %v status %+v; want spec %+v, an owner, lastAppliedAt, attempted %s",
				name, s.Spec, s.Labels, s.Status, want, h1)
		}
	}
	r.status("acme", "with its Event", func(*cs.CompanyStatus) bool { return len(r.eventReasons("acme")) > 0 })
	r.status("globex", "with its Event", func(*cs.CompanyStatus) bool { return len(r.eventReasons("globex")) > 0 })

	// At rest: reconciles of the same commit write no status, no Event.
	before, acme := r.writes.writes.Load(), r.status("acme", "as it was", ready(h1))
	for range 3 {
		r.loop.Trigger()
		_, n = r.reconciled(n, h1)
	}
	if got := r.writes.writes.Load() - before; got != 0 {
		t.Errorf("3 reconciles that changed nothing: %d status or Event writes, want 0", got)
	}
	if now := r.status("acme", "as it was", ready(h1)); now.ResourceVersion != acme.ResourceVersion {
		t.Errorf("acme's status changed at rest: resourceVersion %s → %s", acme.ResourceVersion, now.ResourceVersion)
	}

	// initech's Namespace exists and is not pcsync's: its apply fails, the
	// others' goes on.
	r.foreignNamespace(k.prefix + "initech")
	h2 := k.commit(map[string]string{"acme": "", "globex": "", "initech": ""})
	r.loop.Trigger()
	out, n := r.reconciled(n, h2)
	if out.FailedStage != reconcile.StageApply {
		t.Fatalf("the apply of %s: stage %q (%v), want a failed apply", h2, out.FailedStage, out.Err)
	}
	failed := r.status("initech", "failed", reason(cs.ReasonFailed))
	rec := failed.Status.Condition(cs.ConditionReconciling)
	if failed.Status.Revision != "" || failed.Status.LastAttemptedRevision != h2 || rec == nil || rec.Reason != cs.ReasonRetrying ||
		!strings.Contains(failed.Status.Condition(cs.ConditionReady).Message, k.prefix+"initech") {
		t.Errorf("initech's status: %+v; want no revision, %s attempted, Reconciling (retried), a message naming its Namespace",
			failed.Status, h2)
	}
	r.status("acme", "Ready at "+h2, ready(h2))

	// globex suspended, initech removed (never applied: its status goes).
	h3 := k.commit(map[string]string{"acme": "", "globex": "  suspend: true\n"})
	r.loop.Trigger()
	out, n = r.reconciled(n, h3)
	s := r.status("globex", "suspended", reason(cs.ReasonSuspended))
	if !s.Status.Suspended || s.Status.Revision != h2 || s.Status.LastAttemptedRevision != h3 {
		t.Errorf("globex suspended: %+v; want suspended, revision %s kept, %s attempted", s.Status, h2, h3)
	}
	for _, o := range out.Report.Objects {
		if o.Ref.Namespace == k.prefix+"globex" || o.Ref.Name == k.prefix+"globex" {
			t.Errorf("the suspended globex's %s was %s", o.Ref, o.Action)
		}
	}
	r.quota(k.prefix + "globex") // still there
	r.status("acme", "Ready at "+h3, ready(h3))
	r.gone("initech")

	// A reconcile request is answered by a reconcile that began after it.
	if _, err := cs.RequestReconcile(context.Background(), r.c.Dynamic(), r.ns, "acme", "request-1"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if _, err := cs.WaitHandled(ctx, r.c.Dynamic(), r.ns, "acme", "request-1"); err != nil {
		t.Fatalf("reconcile request: %v", err)
	}
	if r.count() <= n {
		t.Errorf("the request was answered with no reconcile (%d reconciles before and after)", n)
	}

	// acme removed: the only tenant the guard counts (globex's is kept),
	// so its prune is held.
	h4 := k.commit(map[string]string{"globex": "  suspend: true\n"})
	r.loop.Trigger()
	r.reconciled(n, h4)
	held := r.status("acme", "prune held", reason(cs.ReasonPruneHeld))
	if st := held.Status.Condition(cs.ConditionStalled); st == nil || !strings.Contains(held.Status.Condition(cs.ConditionReady).Message, "approve") {
		t.Errorf("acme removed, prune held: %+v; want Stalled and how to approve", held.Status)
	}
	want := map[string][]string{
		"acme":    {"Normal/ReconciliationSucceeded", "Warning/PruneHeld"},
		"globex":  {"Normal/ReconciliationSucceeded", "Normal/Suspended"},
		"initech": {"Warning/ReconciliationFailed"},
	}
	// The recorder sends Events on its own goroutine, after the status
	// that says the prune is held: wait for them.
	var events map[string][]string
	for deadline := time.Now().Add(waitLimit); ; time.Sleep(100 * time.Millisecond) {
		events = map[string][]string{"acme": r.eventReasons("acme"), "globex": r.eventReasons("globex"), "initech": r.eventReasons("initech")}
		if cmp.Equal(want, events) || time.Now().After(deadline) {
			break
		}
	}
	if diff := cmp.Diff(want, events); diff != "" {
		t.Errorf("Events (-want +got):\n%s", diff)
	}
}

// foreignNamespace creates a Namespace as someone else would.
func (r *rig) foreignNamespace(name string) {
	r.t.Helper()
	_, err := r.c.Client().CoreV1().Namespaces().Create(context.Background(),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		r.t.Fatal(err)
	}
}

// quota fails the test when a tenant's ResourceQuota is not there.
func (r *rig) quota(ns string) {
	r.t.Helper()
	if _, err := r.c.Client().CoreV1().ResourceQuotas(ns).Get(context.Background(), "paperclip-quota", metav1.GetOptions{}); err != nil {
		r.t.Errorf("tenant %s: %v", ns, err)
	}
}
