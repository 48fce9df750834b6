package statusctl

import (
	"errors"
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pcsync/pcsync/pkg/apply"
	cs "github.com/pcsync/pcsync/pkg/companystatus"
	"github.com/pcsync/pcsync/pkg/config"
	"github.com/pcsync/pcsync/pkg/reconcile"
)

// intent is what a reconcile says of one company's status; sync merges it
// with the object (merge) and writes what differs. A zero revision,
// attempted or handled keeps the object's.
type intent struct {
	spec            cs.Spec
	ready           metav1.ConditionStatus
	reason, message string
	// retrying sets Reconciling True; stalled sets Stalled True (with
	// reason).
	retrying, stalled bool
	// revision is applied now; attempted was tried.
	revision, attempted string
	suspended           bool
	// handled is a reconcile request answered.
	handled string
	// gone: the company left the config; its object is deleted.
	gone bool
}

// maxMessage bounds a condition's message (the first lines of an error).
const maxMessage = 5

// intents are the statuses a reconcile's outcome gives the companies of
// shard in m (the outcome's model, or the last valid one when the config
// is invalid).
func intents(out reconcile.Outcome, m *config.Model, shard config.Shard) map[string]intent {
	mine := shard.Model(m)
	objErrs := objectErrors(out.Report)
	global := kubeFailed(out) && len(objErrs) == 0
	pcErrs, pcGlobal := paperclipErrors(out)
	res := make(map[string]intent, len(mine.Companies))
	for i := range mine.Companies {
		c := &mine.Companies[i]
		ns := mine.Namespace(c)
		in := intent{spec: cs.Spec{Namespace: ns, ID: c.Spec.ID}, attempted: out.Revision, suspended: c.Suspended()}
		switch {
		case out.Model == nil:
			in.fail(cs.ReasonConfigInvalid, strings.Join(out.ConfigErrors, "\n"))
			in.stalled = true
		case c.Suspended():
			in.ready, in.reason = metav1.ConditionFalse, cs.ReasonSuspended
			in.message = "suspended in the config (spec.suspend): nothing is applied or pruned, no new run or lease starts"
		case len(objErrs[ns]) > 0:
			in.fail(cs.ReasonFailed, errors.Join(objErrs[ns]...).Error())
			in.retrying = out.Retried()
		case global:
			in.fail(cs.ReasonFailed, out.Err.Error())
			in.retrying, in.stalled = out.Retried(), !out.Retried()
		case pcErrs[c.Slug()] != nil || pcGlobal != nil && c.Spec.Paperclip.Manage:
			in.fail(cs.ReasonPaperclipFailed, cmpErr(pcErrs[c.Slug()], pcGlobal).Error())
			in.revision = out.Revision // the Kubernetes side is applied
			in.retrying = out.Retried()
		default:
			in.ready, in.reason, in.revision = metav1.ConditionTrue, cs.ReasonSucceeded, out.Revision
			in.message = "applied revision " + out.Revision
		}
		res[c.Slug()] = in
	}
	return res
}

// fail makes in a failure: Ready False, reason, the message's first lines.
func (in *intent) fail(reason, msg string) {
	in.ready, in.reason, in.message = metav1.ConditionFalse, reason, firstLines(msg, maxMessage)
}

// pruneHeld is the intent of a company that left the config whose
// tenant's deletion the prune guard holds.
func pruneHeld(spec cs.Spec, h *apply.PruneHold, approve string) intent {
	return intent{spec: spec, ready: metav1.ConditionFalse, reason: cs.ReasonPruneHeld, stalled: true,
		message: "removed from the config; the prune guard holds the deletion of its tenant (" + h.Describe() +
			"); to approve it: " + approve}
}

// kubeFailed says the Kubernetes side of out failed (apply or prune).
func kubeFailed(out reconcile.Outcome) bool {
	return out.FailedStage == reconcile.StageApply || out.FailedStage == reconcile.StagePrune
}

// objectErrors are the errors of the objects that failed, by tenant
// namespace (a Namespace's own failure under its name).
func objectErrors(r *apply.ChangeSet) map[string][]error {
	out := map[string][]error{}
	if r == nil {
		return out
	}
	for _, o := range r.Objects {
		if o.Action != apply.ActionFailed || o.Err == nil {
			continue
		}
		ns := o.Ref.Namespace
		if ns == "" && o.Ref.Kind == "Namespace" && o.Ref.Group == "" {
			ns = o.Ref.Name
		}
		out[ns] = append(out[ns], o.Err)
	}
	return out
}

// paperclipErrors are the Paperclip side's failures by company slug, and
// its failure that names no company (Paperclip unreachable: every company
// that opts in failed).
func paperclipErrors(out reconcile.Outcome) (map[string]error, error) {
	by := map[string]error{}
	if out.PaperclipErr == nil {
		return by, nil
	}
	if r := out.Paperclip; r != nil {
		for _, c := range r.Companies {
			errs := []error{c.Err}
			for _, a := range c.Agents {
				if a.Err != nil {
					errs = append(errs, fmt.Errorf("agent %s: %w", a.Agent, a.Err))
				}
			}
			if err := errors.Join(errs...); err != nil {
				by[c.Slug] = err
			}
		}
	}
	if len(by) == 0 {
		return by, out.PaperclipErr
	}
	return by, nil
}

func cmpErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// firstLines is s's first n lines, and how many more there are.
func firstLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) <= n {
		return strings.Join(lines, "\n")
	}
	return strings.Join(lines[:n], "\n") + fmt.Sprintf("\n… and %d more", len(lines)-n)
}
