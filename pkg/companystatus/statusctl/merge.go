package statusctl

import (
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cs "github.com/pcsync/pcsync/pkg/companystatus"
)

// merge is the status intent in gives the object cur (nil: none yet) of
// generation gen, at time at: what in leaves zero is cur's, and a
// condition whose status did not change keeps its lastTransitionTime, as
// does LastAppliedAt its revision's.
func merge(cur *cs.CompanyStatus, in intent, gen int64, at time.Time) cs.Status {
	var old cs.Status
	if cur != nil {
		old = cur.Status
	}
	now := metav1.NewTime(at.UTC().Truncate(time.Second))
	st := cs.Status{
		ObservedGeneration:     gen,
		Revision:               old.Revision,
		LastAttemptedRevision:  old.LastAttemptedRevision,
		LastAppliedAt:          old.LastAppliedAt,
		Suspended:              in.suspended,
		LastHandledReconcileAt: old.LastHandledReconcileAt,
	}
	if in.revision != "" && in.revision != old.Revision {
		st.Revision, st.LastAppliedAt = in.revision, &now
	}
	if in.attempted != "" {
		st.LastAttemptedRevision = in.attempted
	}
	if in.handled != "" {
		st.LastHandledReconcileAt = in.handled
	}
	add := func(t string, status metav1.ConditionStatus, reason, msg string) {
		c := metav1.Condition{Type: t, Status: status, ObservedGeneration: gen, LastTransitionTime: now, Reason: reason, Message: msg}
		if p := old.Condition(t); p != nil && p.Status == status {
			c.LastTransitionTime = p.LastTransitionTime
		}
		st.Conditions = append(st.Conditions, c)
	}
	add(cs.ConditionReady, in.ready, in.reason, in.message)
	if in.retrying {
		add(cs.ConditionReconciling, metav1.ConditionTrue, cs.ReasonRetrying, in.message)
	}
	if in.stalled {
		add(cs.ConditionStalled, metav1.ConditionTrue, in.reason, in.message)
	}
	return st
}

// sameStatus says a and b are the same status (times compared to the
// second, as the API server keeps them).
func sameStatus(a, b cs.Status) bool {
	return equality.Semantic.DeepEqual(a, b)
}

// event is the Event a status change records on its object: the Ready
// condition's reason when it changed, or a new revision applied; "" for
// none.
func event(old *cs.CompanyStatus, st cs.Status) (reason, msg string, warning bool) {
	ready := st.Condition(cs.ConditionReady)
	if ready == nil {
		return "", "", false
	}
	var prev *metav1.Condition
	prevRev := ""
	if old != nil {
		prev, prevRev = old.Status.Condition(cs.ConditionReady), old.Status.Revision
	}
	changed := prev == nil || prev.Reason != ready.Reason || prev.Message != ready.Message && ready.Status != metav1.ConditionTrue
	if !changed && !(ready.Status == metav1.ConditionTrue && st.Revision != prevRev) {
		return "", "", false
	}
	warning = ready.Reason != cs.ReasonSucceeded && ready.Reason != cs.ReasonSuspended
	return ready.Reason, ready.Message, warning
}
