package sandbox

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pcsync/pcsync/pkg/sandbox/leasepod"
)

// TestPodRunning: the wait for a lease pod ends when it runs, and at once
// with the code the user acts on when it never will.
func TestPodRunning(t *testing.T) {
	waiting := func(reason string) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "pcsync-sbx-1"},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: leasepod.ContainerName, Image: "img:1"}}},
			Status: corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{{
				Name: leasepod.ContainerName, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: "m"}}}}},
		}
	}
	phase := func(p corev1.PodPhase) *corev1.Pod {
		pod := waiting("ContainerCreating")
		pod.Status.Phase = p
		return pod
	}
	running := corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
	// withHelper is a pod of a helper container (its state first) and the
	// main container (its state second), in phase ph.
	withHelper := func(ph corev1.PodPhase, helper, main corev1.ContainerState) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "pcsync-sbx-1"},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: leasepod.HelperContainerName, Image: "pcsync:1"}, {Name: leasepod.ContainerName, Image: "img:1"}}},
			Status: corev1.PodStatus{Phase: ph, ContainerStatuses: []corev1.ContainerStatus{
				{Name: leasepod.HelperContainerName, State: helper}, {Name: leasepod.ContainerName, State: main}}},
		}
	}
	wait := func(reason string) corev1.ContainerState {
		return corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: "m"}}
	}
	ended := func(code int32, reason string) corev1.ContainerState {
		return corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Reason: reason, Message: "msg"}}
	}
	type want struct {
		Done bool
		Code Code
		Err  string
	}
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		want want
	}{
		{"running", withHelper(corev1.PodRunning, running, running), want{Done: true}},
		{"running without a helper", func() *corev1.Pod {
			p := phase(corev1.PodRunning)
			p.Status.ContainerStatuses[0].State = running
			return p
		}(), want{Done: true}},
		{"the helper runs, the main container not yet", withHelper(corev1.PodRunning, running, wait("ContainerCreating")), want{}},
		{"the helper's image not pulled", withHelper(corev1.PodPending, wait("ImagePullBackOff"), wait("ContainerCreating")), want{Code: CodeImagePullFailed,
			Err: "Pod/ns/pcsync-sbx-1: container pcsync-bin cannot pull image pcsync:1: ImagePullBackOff: m"}},
		{"the helper's hook failed", withHelper(corev1.PodPending, wait("PostStartHookError"), wait("ContainerCreating")), want{Code: CodePodNotStarting,
			Err: "Pod/ns/pcsync-sbx-1: container pcsync-bin cannot start: PostStartHookError: m"}},
		{"the main container found no pcsync, the helper runs", withHelper(corev1.PodRunning, running, ended(128, "StartError")), want{Code: CodePodNotStarting,
			Err: "Pod/ns/pcsync-sbx-1: ended before it was ready: container sandbox exited 128: StartError msg"}},
		{"both ended", withHelper(corev1.PodFailed, ended(137, "Error"), ended(128, "StartError")), want{Code: CodePodNotStarting,
			Err: "Pod/ns/pcsync-sbx-1: ended before it was ready: container pcsync-bin exited 137: Error msg; container sandbox exited 128: StartError msg"}},
		{"creating", waiting("ContainerCreating"), want{}},
		{"image not pulled", waiting("ErrImagePull"), want{Code: CodeImagePullFailed,
			Err: "Pod/ns/pcsync-sbx-1: container sandbox cannot pull image img:1: ErrImagePull: m"}},
		{"config error", waiting("CreateContainerConfigError"), want{Code: CodePodNotStarting,
			Err: "Pod/ns/pcsync-sbx-1: container sandbox cannot start: CreateContainerConfigError: m"}},
		{"ended", phase(corev1.PodFailed), want{Err: "Pod/ns/pcsync-sbx-1: ended (Failed) before it was ready: phase Failed"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			done, err := podRunning(tc.pod)
			got := want{Done: done}
			if err != nil {
				got.Err = err.Error()
				var ue *UserError
				if errors.As(err, &ue) {
					got.Code = ue.Code
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("podRunning (-want +got):\n%s", diff)
			}
		})
	}
}
