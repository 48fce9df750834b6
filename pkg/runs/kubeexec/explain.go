package kubeexec

import (
	"cmp"
	"fmt"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/pcsync/pcsync/internal/lib/agentpod"
	"github.com/pcsync/pcsync/pkg/procinit"
	"github.com/pcsync/pcsync/pkg/result"
)

// observation is what the informers know of one run at one moment.
type observation struct {
	// Job is the run's Job: the cached one, or the last one seen when it
	// was deleted since. Nil when it was never seen.
	Job *batchv1.Job
	// JobDeleted is set once the Job's deletion was observed.
	JobDeleted bool
	// Pod is the run's pod (the newest, if the Job made several), or nil.
	Pod *corev1.Pod
	// FailedCreate is the newest FailedCreate event of the Job, or nil.
	FailedCreate *corev1.Event
	// Cancelled is set when pcsync deleted the Job on a cancel request.
	Cancelled bool
	// AgentEnded is pcsync init's record of the CLI's end, from the last
	// line of the container's log, or nil.
	AgentEnded *procinit.Record
	// Now is the time of the observation.
	Now time.Time
	// Since returns when a condition named by key was first observed by
	// this daemon, recording now on the first call.
	Since func(key string) time.Time
	// Container is the agent container's name.
	Container string
	// Timeout and TimeoutSource describe the run's deadline, for messages.
	Timeout       time.Duration
	TimeoutSource string
	// MemoryLimit is the agent container's memory limit as configured, for
	// the OOM hint ("" when none).
	MemoryLimit string
	// Grace is the agent's termination grace period, for messages.
	Grace time.Duration
	// UnschedulableGrace, QuotaGrace and ConfigErrorGrace are the
	// Options of the same names.
	UnschedulableGrace, QuotaGrace, ConfigErrorGrace time.Duration
}

// verdict is what an observation means for the run.
type verdict struct {
	// Started is set once the agent container has started (running or
	// terminated): its log can be read.
	Started bool
	// PodDone is set when the agent container will not write any more
	// log: the pod is in a terminal phase, or gone.
	PodDone bool
	// Final is set when the run has ended (or must end now, see Stop).
	Final bool
	// Stop is set when the run ends although its Job is still there (the
	// image cannot be pulled, the pod cannot be scheduled or created):
	// pcsync deletes the Job.
	Stop bool
	// Status, Code and Message are set for endings that pcsync explains
	// itself (OOM kill, image pull, deadline, …). When Code is empty, the
	// adapter's parser decides from the exit code and the output.
	Status  result.Status
	Code    result.ErrorCode
	Message string
	// ExitCode and Signal describe how the agent container ended, when it
	// did.
	ExitCode *int
	Signal   string
	// TimedOut is set when the Job's deadline stopped the run.
	TimedOut bool
	// StartedAt and FinishedAt are the container's times, when known.
	StartedAt, FinishedAt time.Time
	// Timed is set when StartedAt and FinishedAt are pcsync init's, to the
	// millisecond, rather than the kubelet's whole seconds.
	Timed bool
	// Recheck asks for another look after this long even if nothing
	// changes (a grace period is running out); zero means none.
	Recheck time.Duration
}

// explain reads an observation. It is a pure function of its input, so that
// every ending can be tested on constructed objects. The Job's own verdict
// comes first (it is final), then the agent container's end, then what a
// pod that has not started waits for.
func explain(o observation) verdict {
	if o.Cancelled {
		return explainCancelled(o)
	}
	var v verdict
	if o.Job == nil {
		// Not in the cache yet (just created): wait for the informer.
		return v
	}
	v.Started = agentStarted(o)
	if jv, ok := explainJob(o, v); ok {
		return jv
	}
	if pv, ok := explainAgentEnd(o, v); ok {
		return pv
	}
	if o.Pod == nil {
		return explainNoPod(o, v)
	}
	return explainPending(o, v)
}

// explainCancelled is the verdict of a run pcsync cancelled.
func explainCancelled(o observation) verdict {
	var v verdict
	v.Final, v.Status, v.Code = true, result.StatusCancelled, result.ErrCancelled
	v.Message = "cancelled: pcsync deleted the Job"
	if o.Grace > 0 {
		v.Message += fmt.Sprintf("; the agent got SIGTERM, and SIGKILL after %s", o.Grace)
	}
	v.PodDone = true
	fillContainer(&v, o)
	return v
}

// agentStarted says the agent container has started (running or
// terminated), or the pod has.
func agentStarted(o observation) bool {
	cs := agentpod.ContainerStatus(o.Pod, o.Container)
	if cs != nil && (cs.State.Running != nil || cs.State.Terminated != nil || cs.LastTerminationState.Terminated != nil) {
		return true
	}
	return o.Pod != nil && (o.Pod.Status.Phase == corev1.PodRunning || o.Pod.Status.Phase == corev1.PodSucceeded || o.Pod.Status.Phase == corev1.PodFailed)
}

// explainJob reads the Job's own ending: failed (its deadline, the pod's
// failure, or its own reason), complete, or deleted by someone else. ok is
// false while it has none.
func explainJob(o observation, v verdict) (_ verdict, ok bool) {
	if c := jobCondition(o.Job, batchv1.JobFailed); c != nil {
		return explainJobFailed(o, v, c), true
	}
	if jobCondition(o.Job, batchv1.JobComplete) != nil {
		v.Final, v.PodDone = true, true
		fillContainer(&v, o)
		if v.ExitCode == nil {
			v.ExitCode = ptr.To(0)
		}
		return v, true
	}
	if o.JobDeleted {
		v.Final, v.PodDone = true, true
		fillContainer(&v, o)
		v.Status, v.Code = result.StatusFailed, result.ErrInternal
		v.Message = fmt.Sprintf("Job/%s/%s was deleted before the run finished, and not by pcsync (kubectl delete, a namespace deletion, or another controller)",
			o.Job.Namespace, o.Job.Name)
		return v, true
	}
	return v, false
}

// explainJobFailed reads a Job with its Failed condition c.
func explainJobFailed(o observation, v verdict, c *batchv1.JobCondition) verdict {
	v.Final, v.PodDone = true, true
	fillContainer(&v, o)
	if c.Reason == batchv1.JobReasonDeadlineExceeded || deadlinePassed(o.Job, c) {
		v.Status, v.Code, v.TimedOut = result.StatusTimedOut, result.ErrTimeout, true
		v.Message = fmt.Sprintf("timed out: the Job's activeDeadlineSeconds (%s, %s) passed and Kubernetes stopped the pod (SIGTERM, SIGKILL after %s)",
			o.Timeout, o.TimeoutSource, o.Grace)
		return v
	}
	if o.Pod != nil {
		if pv := explainPodFailure(o); pv.Code != "" || pv.ExitCode != nil {
			pv.Final, pv.PodDone, pv.Started = true, true, v.Started
			return pv
		}
	}
	v.Status, v.Code = result.StatusFailed, result.ErrAgentFailed
	v.Message = fmt.Sprintf("the Job failed: %s", reasonMessage(c.Reason, c.Message))
	return v
}

// explainAgentEnd reads the agent's end before the Job's: pcsync init's
// record of the CLI's success, a terminal phase, or the agent container's
// own end. ok is false while the agent has not ended.
func explainAgentEnd(o observation, v verdict) (_ verdict, ok bool) {
	cs := agentpod.ContainerStatus(o.Pod, o.Container)
	if r := o.AgentEnded; r != nil && r.ExitCode == 0 && !agentTerminated(cs) {
		// pcsync init printed the CLI's success as the container's last
		// line: the run is over a kubelet status sync before the kubelet
		// says so. (A failure waits for the kubelet, whose reason, such as
		// OOMKilled, explains it.)
		v.Final, v.PodDone, v.Started = true, true, true
		v.ExitCode = ptr.To(0)
		v.StartedAt, v.FinishedAt, v.Timed = r.StartedAt, r.FinishedAt, true
		return v, true
	}
	pod := o.Pod
	if pod == nil || !(pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed || agentTerminated(cs)) {
		return v, false
	}
	// A terminal phase, or the agent container's own end: a kubelet
	// reports the container terminated one status sync (about a second)
	// before it gives the pod its phase, and the container never restarts
	// (restartPolicy Never), so its end is the run's.
	v.PodDone = true
	if dt := agentpod.Condition(pod, corev1.DisruptionTarget); pod.DeletionTimestamp != nil || dt != nil && dt.Status == corev1.ConditionTrue {
		// Stopped from outside (the Job's deadline, an eviction, a
		// preemption): the Job's condition will say which.
		return v, true
	}
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase != corev1.PodFailed && cs.State.Terminated.ExitCode == 0 {
		v.Final = true
		fillContainer(&v, o)
		if v.ExitCode == nil {
			v.ExitCode = ptr.To(0)
		}
		return v, true
	}
	pv := explainPodFailure(o)
	pv.Final, pv.PodDone, pv.Started = true, true, v.Started
	return pv, true
}

// explainPending reads a pod that has not started: it cannot be
// scheduled, its image cannot be pulled, or its container cannot be made,
// each after its grace.
func explainPending(o observation, v verdict) verdict {
	pod := o.Pod
	if pod.Status.Phase != corev1.PodPending && pod.Status.Phase != "" {
		return v
	}
	if c := agentpod.Unschedulable(pod); c != nil {
		since := o.Since("unschedulable")
		if t := c.LastTransitionTime.Time; !t.IsZero() && t.Before(since) {
			since = t
		}
		if waited := o.Now.Sub(since); waited < o.UnschedulableGrace {
			v.Recheck = o.UnschedulableGrace - waited
			return v
		}
		v.Final, v.Stop = true, true
		v.Status, v.Code = result.StatusFailed, result.ErrUnschedulable
		v.Message = fmt.Sprintf("the pod could not be scheduled for %s: %s", o.UnschedulableGrace, strings.TrimSpace(c.Message))
		return v
	}
	cs := agentpod.ContainerStatus(pod, o.Container)
	if cs == nil || cs.State.Waiting == nil {
		return v
	}
	w := cs.State.Waiting
	switch {
	case agentpod.ImagePullFailed(w.Reason):
		v.Final, v.Stop = true, true
		v.Status, v.Code = result.StatusFailed, result.ErrImagePullFailed
		v.Message = fmt.Sprintf("container %s cannot pull image %s: %s", cs.Name, cmp.Or(agentpod.ContainerImage(pod, cs.Name), cs.Image), reasonMessage(w.Reason, w.Message))
	case agentpod.WaitingOf(w.Reason) == agentpod.WaitingCreate:
		since := o.Since("config:" + w.Reason)
		if waited := o.Now.Sub(since); waited < o.ConfigErrorGrace {
			v.Recheck = o.ConfigErrorGrace - waited
			return v
		}
		v.Final, v.Stop = true, true
		v.Status, v.Code = result.StatusFailed, result.ErrInternal
		v.Message = fmt.Sprintf("container %s could not be created for %s: %s", cs.Name, o.ConfigErrorGrace, reasonMessage(w.Reason, w.Message))
	}
	return v
}

// agentTerminated reports whether the agent container has ended: its state
// is terminated. Its last termination state does not count, since a
// container in it is running again.
func agentTerminated(cs *corev1.ContainerStatus) bool {
	return cs != nil && cs.State.Terminated != nil
}

// explainNoPod reads a Job that has no pod yet: the Job controller may be
// refused the pod (quota, limit range, Pod Security), which it reports only
// as a FailedCreate event on the Job.
func explainNoPod(o observation, v verdict) verdict {
	ev := o.FailedCreate
	if ev == nil || o.Job.Status.Active > 0 {
		return v
	}
	msg := strings.TrimSpace(ev.Message)
	switch {
	case strings.Contains(msg, "exceeded quota") || strings.Contains(msg, "status unknown for quota"):
		// Other runs may free the quota; a quota the controller has not
		// counted yet (a new namespace) is counted within seconds.
		since := o.Since("quota")
		if t := ev.FirstTimestamp.Time; !t.IsZero() && t.Before(since) {
			since = t
		}
		if waited := o.Now.Sub(since); waited < o.QuotaGrace {
			v.Recheck = o.QuotaGrace - waited
			return v
		}
		v.Final, v.Stop = true, true
		v.Status, v.Code = result.StatusFailed, result.ErrQuotaExceeded
		v.Message = fmt.Sprintf("the namespace's ResourceQuota refused the pod for %s: %s", o.QuotaGrace, msg)
	case strings.Contains(msg, "forbidden"):
		// A LimitRange maximum or minimum, Pod Security, another admission
		// policy: retrying cannot help.
		v.Final, v.Stop = true, true
		v.Status, v.Code = result.StatusFailed, result.ErrInternal
		v.Message = "the pod was refused by admission (LimitRange, Pod Security or another policy): " + msg
	}
	return v
}

// explainPodFailure explains a pod in phase Failed from its agent
// container's terminated state, or the pod's own reason.
func explainPodFailure(o observation) verdict {
	var v verdict
	fillContainer(&v, o)
	pod := o.Pod
	cs := agentpod.ContainerStatus(pod, o.Container)
	var term *corev1.ContainerStateTerminated
	if cs != nil {
		term = cs.State.Terminated
		if term == nil {
			term = cs.LastTerminationState.Terminated
		}
	}
	if term == nil {
		// The pod failed without the container ever running: rejected by
		// the kubelet (OutOfcpu, NodeAffinity, …), evicted, or lost.
		v.Status = result.StatusFailed
		v.Code = result.ErrInternal
		switch r := pod.Status.Reason; {
		case strings.HasPrefix(r, "OutOf") || r == "NodeAffinity" || r == "NodeSelectorMismatching" || r == "UnexpectedAdmissionError":
			v.Code = result.ErrUnschedulable
		case r == "Evicted":
			v.Code = result.ErrInternal
		}
		v.Message = "the pod failed before the agent ran: " + reasonMessage(pod.Status.Reason, pod.Status.Message)
		return v
	}
	desc := describeTermination(o.Container, term)
	if term.Reason == "OOMKilled" {
		v.Status, v.Code = result.StatusFailed, result.ErrOOMKilled
		hint := "raise the agent's resources.limits.memory"
		if o.MemoryLimit != "" {
			hint = fmt.Sprintf("it needed more than its memory limit of %s; raise the agent's resources.limits.memory", o.MemoryLimit)
		}
		v.Message = desc + ": " + hint
		return v
	}
	if pod.Status.Reason == "Evicted" {
		v.Status, v.Code = result.StatusFailed, result.ErrInternal
		v.Message = "the pod was evicted (" + strings.TrimSpace(pod.Status.Message) + "); " + desc
		return v
	}
	// The agent's own failure: the parser decides the code; the message
	// explains the container's end.
	v.Message = desc
	return v
}

// describeTermination renders a terminated container: reason, exit code,
// signal and message, with the OOM hint for 137.
func describeTermination(name string, t *corev1.ContainerStateTerminated) string {
	var b strings.Builder
	fmt.Fprintf(&b, "container %s terminated", name)
	if t.Reason != "" {
		fmt.Fprintf(&b, " (%s)", t.Reason)
	}
	fmt.Fprintf(&b, " with exit code %d", t.ExitCode)
	if sig := signalOf(t); sig != "" {
		fmt.Fprintf(&b, " (%s)", sig)
	}
	if t.ExitCode == 137 && t.Reason != "OOMKilled" {
		b.WriteString(", which is SIGKILL: often the memory limit (OOM kill) when pcsync did not stop it")
	}
	_, msg, _ := procinit.ParseRecord(t.Message)
	if m := strings.TrimSpace(msg); m != "" {
		if len(m) > 1000 {
			m = m[:1000] + "…"
		}
		fmt.Fprintf(&b, ": %s", m)
	}
	return b.String()
}

// fillContainer copies the agent container's exit code, signal and times
// into v.
func fillContainer(v *verdict, o observation) {
	cs := agentpod.ContainerStatus(o.Pod, o.Container)
	if cs == nil {
		return
	}
	if r := cs.State.Running; r != nil {
		v.StartedAt = r.StartedAt.Time
	}
	t := cs.State.Terminated
	if t == nil {
		t = cs.LastTerminationState.Terminated
	}
	if t == nil {
		return
	}
	v.ExitCode = ptr.To(int(t.ExitCode))
	v.Signal = signalOf(t)
	v.StartedAt, v.FinishedAt = t.StartedAt.Time, t.FinishedAt.Time
	if rec, _, ok := procinit.ParseRecord(t.Message); ok {
		// pcsync init's own times, to the millisecond; the kubelet's are
		// whole seconds.
		v.StartedAt, v.FinishedAt, v.Timed = rec.StartedAt, rec.FinishedAt, true
	}
}

// signalOf names the signal that ended a container: its Signal field, else
// an exit code of 128+n.
func signalOf(t *corev1.ContainerStateTerminated) string {
	n := int(t.Signal)
	if n == 0 && t.ExitCode > 128 && t.ExitCode < 128+65 {
		n = int(t.ExitCode) - 128
	}
	if n == 0 {
		return ""
	}
	if name := unix.SignalName(syscall.Signal(n)); name != "" {
		return name
	}
	return fmt.Sprintf("SIG%d", n)
}

func reasonMessage(reason, msg string) string {
	msg = strings.TrimSpace(msg)
	switch {
	case reason == "":
		return msg
	case msg == "":
		return reason
	}
	return reason + ": " + msg
}

func jobCondition(job *batchv1.Job, t batchv1.JobConditionType) *batchv1.JobCondition {
	for i := range job.Status.Conditions {
		if c := &job.Status.Conditions[i]; c.Type == t && c.Status == corev1.ConditionTrue {
			return c
		}
	}
	return nil
}

// jobFinished reports whether a Job has its Complete or Failed condition.
func jobFinished(job *batchv1.Job) bool {
	return jobCondition(job, batchv1.JobComplete) != nil || jobCondition(job, batchv1.JobFailed) != nil
}

// deadlinePassed reports whether the Job failed at or after its
// activeDeadlineSeconds. The Job controller kills the pod at the deadline,
// and under load it may count that pod's failure first and give the Job
// reason BackoffLimitExceeded instead of DeadlineExceeded: the run still
// timed out.
func deadlinePassed(job *batchv1.Job, failed *batchv1.JobCondition) bool {
	if job.Spec.ActiveDeadlineSeconds == nil || job.Status.StartTime == nil {
		return false
	}
	deadline := job.Status.StartTime.Add(time.Duration(*job.Spec.ActiveDeadlineSeconds) * time.Second)
	at := failed.LastTransitionTime.Time
	if ft := jobCondition(job, batchv1.JobFailureTarget); ft != nil && ft.LastTransitionTime.Before(&failed.LastTransitionTime) {
		at = ft.LastTransitionTime.Time
	}
	return !at.Before(deadline)
}
