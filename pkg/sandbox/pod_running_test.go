package sandbox

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestPodRunning: the wait for a lease pod ends when it runs, and at once
// with the code the user acts on when it never will.
func TestPodRunning(t *testing.T) {
	waiting := func(reason string) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "pcsync-sbx-1"},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: ContainerName, Image: "img:1"}}},
			Status: corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{{
				Name: ContainerName, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: "m"}}}}},
		}
	}
	phase := func(p corev1.PodPhase) *corev1.Pod {
		pod := waiting("ContainerCreating")
		pod.Status.Phase = p
		return pod
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
		{"running", phase(corev1.PodRunning), want{Done: true}},
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
