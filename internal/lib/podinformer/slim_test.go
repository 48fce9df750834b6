package podinformer

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/pcsync/pcsync/internal/lib/agentpod"
)

// TestSlim: the cached pod keeps what the consumers read (metadata but
// managed fields, containers' names and images, node, deadline, status
// but resources and mounts) and nothing else; a second Slim changes
// nothing.
func TestSlim(t *testing.T) {
	now := metav1.Now()
	meta := metav1.ObjectMeta{Name: "run-1-abc", Namespace: "paperclip-acme", UID: "u1", ResourceVersion: "7",
		CreationTimestamp: now, DeletionTimestamp: &now,
		Labels:          map[string]string{agentpod.LabelManagedBy: agentpod.ManagedByValue, agentpod.LabelRole: agentpod.RoleAgent},
		Annotations:     map[string]string{agentpod.AnnotationTokenHash: "00ff"},
		OwnerReferences: []metav1.OwnerReference{{Kind: "Job", Name: "run-1", UID: "j1", Controller: ptr.To(true)}}}
	terminated := corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error"}}
	for _, tc := range []struct {
		name      string
		pod, want *corev1.Pod
	}{
		{name: "a pod whole", pod: &corev1.Pod{
			ObjectMeta: withManagedFields(meta),
			Spec: corev1.PodSpec{NodeName: "node-1", ActiveDeadlineSeconds: ptr.To(int64(60)), ServiceAccountName: "sa",
				InitContainers: []corev1.Container{{Name: "helper", Image: "pcsync:dev", Command: []string{"cp"}}},
				Containers: []corev1.Container{{Name: "agent", Image: "agent:1", Env: []corev1.EnvVar{{Name: "HOME", Value: "/home"}},
					VolumeMounts: []corev1.VolumeMount{{Name: "work", MountPath: "/workspace"}}}},
				Volumes: []corev1.Volume{{Name: "work"}}},
			Status: corev1.PodStatus{Phase: corev1.PodFailed, Reason: "Evicted", Message: "low on memory", PodIP: "10.0.0.7",
				HostIP: "192.168.0.1", QOSClass: corev1.PodQOSBurstable, StartTime: &now,
				Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse, Message: "not ready"}},
				ContainerStatuses: []corev1.ContainerStatus{{Name: "agent", Image: "agent:1", State: terminated, RestartCount: 1,
					VolumeMounts: []corev1.VolumeMountStatus{{Name: "work", MountPath: "/workspace"}},
					Resources:    &corev1.ResourceRequirements{}}}},
		}, want: &corev1.Pod{
			ObjectMeta: meta,
			Spec: corev1.PodSpec{NodeName: "node-1", ActiveDeadlineSeconds: ptr.To(int64(60)),
				InitContainers: []corev1.Container{{Name: "helper", Image: "pcsync:dev"}},
				Containers:     []corev1.Container{{Name: "agent", Image: "agent:1"}}},
			Status: corev1.PodStatus{Phase: corev1.PodFailed, Reason: "Evicted", Message: "low on memory", PodIP: "10.0.0.7", StartTime: &now,
				Conditions:        []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse, Message: "not ready"}},
				ContainerStatuses: []corev1.ContainerStatus{{Name: "agent", Image: "agent:1", State: terminated, RestartCount: 1}}},
		}},
		{name: "a pod just created", pod: &corev1.Pod{ObjectMeta: meta}, want: &corev1.Pod{ObjectMeta: meta}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Slim(tc.pod.DeepCopy())
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("the cached pod (-want +got):\n%s", diff)
			}
			again, _ := Slim(got.(*corev1.Pod).DeepCopy())
			if diff := cmp.Diff(got, again); diff != "" {
				t.Errorf("a second Slim (-once +twice):\n%s", diff)
			}
		})
	}
	if got, _ := Slim("not a pod"); got != "not a pod" {
		t.Errorf("Slim of a non-pod: %v", got)
	}
}

func withManagedFields(m metav1.ObjectMeta) metav1.ObjectMeta {
	m.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubelet", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:status":{}}`)}}}
	return m
}
