package kubeexec

import (
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/pcsync/pcsync/pkg/result"
)

// watchedTimes is what this daemon's watch saw of the agent container's start
// and end, on the daemon's clock, to the millisecond. The kubelet reports
// the container's own times in whole seconds only: a sub-second run of an
// image without pcsync init would last 0 ms by them.
//
// The watch sees the kubelet's status updates, which come about a second
// apart (a relist of the container runtime): a container that starts and
// ends between two of them is never seen running. Its start is then the
// last look before it started, so its duration is at most one status cycle
// too long, never 0.
type watchedTimes struct {
	// before is the last look at the container before it started (no pod
	// yet, or the container waiting); zero when this daemon never saw it
	// so (it adopted the run after the start): then its own sight of the
	// container says nothing of its start.
	before time.Time
	// start and end are when the watch first saw the container running
	// (or, when it never saw it running, before) and ended; zero until
	// then.
	start, end time.Time
}

// observe records one look at the agent container (cs, nil while the pod or
// its status is missing) at now.
func (w *watchedTimes) observe(cs *corev1.ContainerStatus, now time.Time) {
	switch {
	case cs == nil || cs.State.Running == nil && cs.State.Terminated == nil:
		if w.start.IsZero() {
			w.before = now
		}
	case w.before.IsZero():
		// Started before this daemon looked.
	case cs.State.Running != nil:
		if w.start.IsZero() {
			w.start = now
		}
	default: // terminated
		if w.start.IsZero() {
			// Started and ended between two status updates.
			w.start = w.before
		}
		if w.end.IsZero() {
			w.end = now
		}
	}
}

// runTimes is everything a run's startedAt and finishedAt are chosen from.
type runTimes struct {
	// verdict is the verdict's: the container's times (the kubelet's
	// whole seconds, or pcsync init's record when Timed).
	verdict verdict
	// runningAt is the container's start as its Running state said.
	runningAt time.Time
	watch     watchedTimes
	// created is the Job's creation (zero when unknown).
	created time.Time
	// endNow: the run ends now although the container may not have
	// (pcsync stopped it, or it was cancelled).
	endNow bool
	now    time.Time
}

// resolve chooses the run's times and says whose they are: pcsync init's
// record where the image has it; else what the daemon's watch saw, when it
// saw the container start and, later, end (or the run end now); else the
// kubelet's whole seconds; and the Job's creation to now, by nobody, when
// the container never started.
func (t runTimes) resolve() (started, finished time.Time, by *result.TimedBy) {
	v, w := t.verdict, t.watch
	started, finished = v.StartedAt, v.FinishedAt
	switch {
	case v.Timed:
		by = result.Ptr(result.TimedByInit)
	case !w.start.IsZero() && (w.end.After(w.start) || w.end.IsZero() && t.endNow):
		started, finished = w.start, w.end
		by = result.Ptr(result.TimedByWatch)
	default:
		started = earliest(t.runningAt, v.StartedAt)
		if !started.IsZero() {
			by = result.Ptr(result.TimedByKubelet)
		}
	}
	if started.IsZero() {
		started = t.created
	}
	if started.IsZero() {
		started = t.now
	}
	if finished.IsZero() || finished.Before(started) || t.endNow {
		finished = t.now
	}
	return started, finished, by
}
