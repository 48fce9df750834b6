package kubeexec

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/pcsync/pcsync/pkg/procinit"
	"github.com/pcsync/pcsync/pkg/result"
)

var t0 = time.Date(2026, 8, 14, 12, 0, 0, 0, time.UTC)

func testJob(conds ...batchv1.JobCondition) *batchv1.Job {
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: "paperclip-acme", Name: "acme-coder-r1-0123abcd", UID: "job-uid"},
		Status:     batchv1.JobStatus{Conditions: conds},
	}
}

func cond(t batchv1.JobConditionType, reason, msg string) batchv1.JobCondition {
	return batchv1.JobCondition{Type: t, Status: corev1.ConditionTrue, Reason: reason, Message: msg}
}

func testPod(phase corev1.PodPhase, state corev1.ContainerState) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "paperclip-acme", Name: "acme-coder-r1-0123abcd-x7k2p"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "agent", Image: "ghcr.io/paperclipai/agent-runtime-claude:v1"}}},
		Status: corev1.PodStatus{
			Phase:             phase,
			ContainerStatuses: []corev1.ContainerStatus{{Name: "agent", State: state}},
		},
	}
}

func terminated(reason string, code int32, msg string) corev1.ContainerState {
	return corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
		Reason: reason, ExitCode: code, Message: msg,
		StartedAt: metav1.NewTime(t0), FinishedAt: metav1.NewTime(t0.Add(time.Minute)),
	}}
}

func waiting(reason, msg string) corev1.ContainerState {
	return corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: msg}}
}

func running() corev1.ContainerState {
	return corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(t0)}}
}

func unschedulablePod(since time.Time) *corev1.Pod {
	p := testPod(corev1.PodPending, corev1.ContainerState{})
	p.Status.ContainerStatuses = nil
	p.Status.Conditions = []corev1.PodCondition{{
		Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
		Message:            "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector.",
		LastTransitionTime: metav1.NewTime(since),
	}}
	return p
}

func failedCreate(msg string, first time.Time) *corev1.Event {
	return &corev1.Event{
		Reason: "FailedCreate", Message: msg, FirstTimestamp: metav1.NewTime(first), LastTimestamp: metav1.NewTime(first),
		InvolvedObject: corev1.ObjectReference{Kind: "Job", Namespace: "paperclip-acme", Name: "acme-coder-r1-0123abcd", UID: "job-uid"},
	}
}

func TestExplain(t *testing.T) {
	deleting := testPod(corev1.PodFailed, terminated("Error", 143, ""))
	deleting.DeletionTimestamp = &metav1.Time{Time: t0}
	outOfCPU := testPod(corev1.PodFailed, corev1.ContainerState{})
	outOfCPU.Status.ContainerStatuses = nil
	outOfCPU.Status.Reason, outOfCPU.Status.Message = "OutOfcpu", "Node didn't have enough resource: cpu, requested: 4000, used: 0, capacity: 2000"
	start, finish := t0, t0.Add(time.Minute)

	tests := []struct {
		name string
		obs  observation
		want verdict
	}{
		{
			name: "job not in the cache yet",
			obs:  observation{},
			want: verdict{},
		},
		{
			name: "running",
			obs:  observation{Job: testJob(), Pod: testPod(corev1.PodRunning, running())},
			want: verdict{Started: true},
		},
		{
			name: "pod succeeded before the Job's condition",
			obs:  observation{Job: testJob(), Pod: testPod(corev1.PodSucceeded, terminated("Completed", 0, ""))},
			want: verdict{Started: true, PodDone: true, Final: true, ExitCode: ptr.To(0), StartedAt: start, FinishedAt: finish},
		},
		{
			name: "job complete",
			obs:  observation{Job: testJob(cond(batchv1.JobComplete, "CompletionsReached", "")), Pod: testPod(corev1.PodSucceeded, terminated("Completed", 0, ""))},
			want: verdict{Started: true, PodDone: true, Final: true, ExitCode: ptr.To(0), StartedAt: start, FinishedAt: finish},
		},
		{
			name: "OOM killed",
			obs:  observation{Job: testJob(), Pod: testPod(corev1.PodFailed, terminated("OOMKilled", 137, "")), MemoryLimit: "4Gi"},
			want: verdict{
				Started: true, PodDone: true, Final: true, Status: result.StatusFailed, Code: result.ErrOOMKilled,
				Message:  "container agent terminated (OOMKilled) with exit code 137 (SIGKILL): it needed more than its memory limit of 4Gi; raise the agent's resources.limits.memory",
				ExitCode: ptr.To(137), Signal: "SIGKILL", StartedAt: start, FinishedAt: finish,
			},
		},
		{
			name: "agent exit code 1 with a termination message: the parser decides",
			obs:  observation{Job: testJob(cond(batchv1.JobFailed, "BackoffLimitExceeded", "Job has reached the specified backoff limit")), Pod: testPod(corev1.PodFailed, terminated("Error", 1, "could not reach api"))},
			want: verdict{
				Started: true, PodDone: true, Final: true,
				Message:  "container agent terminated (Error) with exit code 1: could not reach api",
				ExitCode: ptr.To(1), StartedAt: start, FinishedAt: finish,
			},
		},
		{
			name: "SIGKILL without OOMKilled",
			obs:  observation{Job: testJob(), Pod: testPod(corev1.PodFailed, terminated("Error", 137, ""))},
			want: verdict{
				Started: true, PodDone: true, Final: true,
				Message:  "container agent terminated (Error) with exit code 137 (SIGKILL), which is SIGKILL: often the memory limit (OOM kill) when pcsync did not stop it",
				ExitCode: ptr.To(137), Signal: "SIGKILL", StartedAt: start, FinishedAt: finish,
			},
		},
		{
			name: "image pull back-off fails at once",
			obs:  observation{Job: testJob(), Pod: testPod(corev1.PodPending, waiting("ImagePullBackOff", `Back-off pulling image "ghcr.io/paperclipai/agent-runtime-claude:v1"`))},
			want: verdict{
				Final: true, Stop: true, Status: result.StatusFailed, Code: result.ErrImagePullFailed,
				Message: `container agent cannot pull image ghcr.io/paperclipai/agent-runtime-claude:v1: ImagePullBackOff: Back-off pulling image "ghcr.io/paperclipai/agent-runtime-claude:v1"`,
			},
		},
		{
			name: "invalid image name",
			obs:  observation{Job: testJob(), Pod: testPod(corev1.PodPending, waiting("InvalidImageName", "couldn't parse image name"))},
			want: verdict{
				Final: true, Stop: true, Status: result.StatusFailed, Code: result.ErrImagePullFailed,
				Message: "container agent cannot pull image ghcr.io/paperclipai/agent-runtime-claude:v1: InvalidImageName: couldn't parse image name",
			},
		},
		{
			name: "creating the container",
			obs:  observation{Job: testJob(), Pod: testPod(corev1.PodPending, waiting("ContainerCreating", ""))},
			want: verdict{},
		},
		{
			name: "unschedulable within the grace period",
			obs:  observation{Job: testJob(), Pod: unschedulablePod(t0), Now: t0.Add(30 * time.Second), UnschedulableGrace: 2 * time.Minute},
			want: verdict{Recheck: 90 * time.Second},
		},
		{
			name: "unschedulable beyond the grace period",
			obs:  observation{Job: testJob(), Pod: unschedulablePod(t0), Now: t0.Add(3 * time.Minute), UnschedulableGrace: 2 * time.Minute},
			want: verdict{
				Final: true, Stop: true, Status: result.StatusFailed, Code: result.ErrUnschedulable,
				Message: "the pod could not be scheduled for 2m0s: 0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector.",
			},
		},
		{
			name: "container config error beyond its grace period",
			obs: observation{Job: testJob(), Pod: testPod(corev1.PodPending, waiting("CreateContainerConfigError", `secret "globex-github" not found`)),
				Now: t0.Add(2 * time.Minute), ConfigErrorGrace: time.Minute},
			want: verdict{
				Final: true, Stop: true, Status: result.StatusFailed, Code: result.ErrInternal,
				Message: `container agent could not be created for 1m0s: CreateContainerConfigError: secret "globex-github" not found`,
			},
		},
		{
			name: "deadline exceeded",
			obs: observation{Job: testJob(cond(batchv1.JobFailed, batchv1.JobReasonDeadlineExceeded, "Job was active longer than specified deadline")),
				Timeout: 5 * time.Second, TimeoutSource: "the request's timeoutSec", Grace: 15 * time.Second},
			want: verdict{
				PodDone: true, Final: true, Status: result.StatusTimedOut, Code: result.ErrTimeout, TimedOut: true,
				Message: "timed out: the Job's activeDeadlineSeconds (5s, the request's timeoutSec) passed and Kubernetes stopped the pod (SIGTERM, SIGKILL after 15s)",
			},
		},
		{
			name: "pod killed from outside: wait for the Job's condition",
			obs:  observation{Job: testJob(), Pod: deleting},
			want: verdict{Started: true, PodDone: true},
		},
		{
			name: "pod failed before the agent ran",
			obs:  observation{Job: testJob(), Pod: outOfCPU},
			want: verdict{
				Started: true, PodDone: true, Final: true, Status: result.StatusFailed, Code: result.ErrUnschedulable,
				Message: "the pod failed before the agent ran: OutOfcpu: Node didn't have enough resource: cpu, requested: 4000, used: 0, capacity: 2000",
			},
		},
		{
			name: "job deleted by someone else",
			obs:  observation{Job: testJob(), JobDeleted: true, Pod: testPod(corev1.PodRunning, running())},
			want: verdict{
				Started: true, PodDone: true, Final: true, Status: result.StatusFailed, Code: result.ErrInternal, StartedAt: start,
				Message: "Job/paperclip-acme/acme-coder-r1-0123abcd was deleted before the run finished, and not by pcsync (kubectl delete, a namespace deletion, or another controller)",
			},
		},
		{
			name: "job deleted after it completed",
			obs:  observation{Job: testJob(cond(batchv1.JobComplete, "CompletionsReached", "")), JobDeleted: true},
			want: verdict{PodDone: true, Final: true, ExitCode: ptr.To(0)},
		},
		{
			name: "quota refusal within the grace period",
			obs: observation{Job: testJob(), FailedCreate: failedCreate(`Error creating: pods "x" is forbidden: exceeded quota: paperclip-quota, requested: limits.memory=4Gi, used: limits.memory=40Gi, limited: limits.memory=40Gi`, t0),
				Now: t0.Add(10 * time.Second), QuotaGrace: time.Minute},
			want: verdict{Recheck: 50 * time.Second},
		},
		{
			name: "quota refusal beyond the grace period",
			obs: observation{Job: testJob(), FailedCreate: failedCreate(`Error creating: pods "x" is forbidden: exceeded quota: paperclip-quota, requested: limits.memory=4Gi, used: limits.memory=40Gi, limited: limits.memory=40Gi`, t0),
				Now: t0.Add(2 * time.Minute), QuotaGrace: time.Minute},
			want: verdict{
				Final: true, Stop: true, Status: result.StatusFailed, Code: result.ErrQuotaExceeded,
				Message: `the namespace's ResourceQuota refused the pod for 1m0s: Error creating: pods "x" is forbidden: exceeded quota: paperclip-quota, requested: limits.memory=4Gi, used: limits.memory=40Gi, limited: limits.memory=40Gi`,
			},
		},
		{
			name: "quota not counted yet: wait",
			obs:  observation{Job: testJob(), FailedCreate: failedCreate(`Error creating: pods "x" is forbidden: status unknown for quota: paperclip-quota, resource: limits.memory`, t0), Now: t0, QuotaGrace: time.Minute},
			want: verdict{Recheck: time.Minute},
		},
		{
			name: "limit range refusal fails at once",
			obs:  observation{Job: testJob(), FailedCreate: failedCreate(`Error creating: pods "x" is forbidden: maximum memory usage per Container is 8Gi, but limit is 16Gi`, t0), Now: t0},
			want: verdict{
				Final: true, Stop: true, Status: result.StatusFailed, Code: result.ErrInternal,
				Message: `the pod was refused by admission (LimitRange, Pod Security or another policy): Error creating: pods "x" is forbidden: maximum memory usage per Container is 8Gi, but limit is 16Gi`,
			},
		},
		{
			name: "cancelled",
			obs:  observation{Job: testJob(), Cancelled: true, Pod: testPod(corev1.PodRunning, running()), Grace: time.Minute},
			want: verdict{
				PodDone: true, Final: true, Status: result.StatusCancelled, Code: result.ErrCancelled, StartedAt: start,
				Message: "cancelled: pcsync deleted the Job; the agent got SIGTERM, and SIGKILL after 1m0s",
			},
		},
		{
			// A real kubelet reports the container's end one status sync
			// before the pod's phase: the run ends on the container.
			name: "container exited 0, pod still Running",
			obs:  observation{Job: testJob(), Pod: testPod(corev1.PodRunning, terminated("Completed", 0, ""))},
			want: verdict{
				Started: true, PodDone: true, Final: true,
				ExitCode: ptr.To(0), StartedAt: start, FinishedAt: finish,
			},
		},
		{
			name: "container exited 3, pod still Running",
			obs:  observation{Job: testJob(), Pod: testPod(corev1.PodRunning, terminated("Error", 3, ""))},
			want: verdict{
				Started: true, PodDone: true, Final: true,
				Message:  "container agent terminated (Error) with exit code 3",
				ExitCode: ptr.To(3), StartedAt: start, FinishedAt: finish,
			},
		},
		{
			name: "container OOM-killed, pod still Running",
			obs:  observation{Job: testJob(), Pod: testPod(corev1.PodRunning, terminated("OOMKilled", 137, "")), MemoryLimit: "2Gi"},
			want: verdict{
				Started: true, PodDone: true, Final: true, Status: result.StatusFailed, Code: result.ErrOOMKilled,
				Message:  "container agent terminated (OOMKilled) with exit code 137 (SIGKILL): it needed more than its memory limit of 2Gi; raise the agent's resources.limits.memory",
				ExitCode: ptr.To(137), Signal: "SIGKILL", StartedAt: start, FinishedAt: finish,
			},
		},
		{
			// pcsync init's record gives the times to the millisecond,
			// and is no part of the message.
			name: "pcsync init's record",
			obs: observation{Job: testJob(), Pod: testPod(corev1.PodRunning, terminated("Error", 3,
				"disk full\n"+procinit.Record{StartedAt: t0.Add(250 * time.Millisecond), FinishedAt: t0.Add(1150 * time.Millisecond), ExitCode: 3}.String()+"\n"))},
			want: verdict{
				Started: true, PodDone: true, Final: true,
				Message:  "container agent terminated (Error) with exit code 3: disk full",
				ExitCode: ptr.To(3), StartedAt: t0.Add(250 * time.Millisecond), FinishedAt: t0.Add(1150 * time.Millisecond), Timed: true,
			},
		},
		{
			// pcsync init printed the CLI's success as the log's last
			// line; the kubelet still says running.
			name: "pcsync init's success in the log",
			obs: observation{Job: testJob(), Pod: testPod(corev1.PodRunning, running()),
				AgentEnded: &procinit.Record{StartedAt: t0.Add(250 * time.Millisecond), FinishedAt: t0.Add(400 * time.Millisecond)}},
			want: verdict{
				Started: true, PodDone: true, Final: true,
				ExitCode: ptr.To(0), StartedAt: t0.Add(250 * time.Millisecond), FinishedAt: t0.Add(400 * time.Millisecond), Timed: true,
			},
		},
		{
			// A failure waits for the kubelet's reason (OOMKilled, …).
			name: "pcsync init's failure in the log",
			obs: observation{Job: testJob(), Pod: testPod(corev1.PodRunning, running()),
				AgentEnded: &procinit.Record{StartedAt: t0, FinishedAt: t0.Add(time.Second), ExitCode: 137, Signal: "SIGKILL"}},
			want: verdict{Started: true},
		},
		{
			// Restarted: only the current state counts.
			name: "container running again after a termination",
			obs: observation{Job: testJob(), Pod: func() *corev1.Pod {
				p := testPod(corev1.PodRunning, running())
				p.Status.ContainerStatuses[0].LastTerminationState = terminated("Error", 1, "")
				return p
			}()},
			want: verdict{Started: true},
		},
		{
			name: "terminated by SIGTERM",
			obs:  observation{Job: testJob(), Pod: testPod(corev1.PodFailed, terminated("Error", 143, ""))},
			want: verdict{
				Started: true, PodDone: true, Final: true,
				Message:  "container agent terminated (Error) with exit code 143 (SIGTERM)",
				ExitCode: ptr.To(143), Signal: "SIGTERM", StartedAt: start, FinishedAt: finish,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := tt.obs
			o.Container = "agent"
			if o.Now.IsZero() {
				o.Now = t0
			}
			// Every condition was first seen at t0.
			o.Since = func(string) time.Time { return t0 }
			got := explain(o)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("explain (-want +got):\n%s", diff)
			}
		})
	}
}
