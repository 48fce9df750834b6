package tokensync

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pcsync/pcsync/internal/lib/agentpod"
	"github.com/pcsync/pcsync/internal/lib/podinformer"
	"github.com/pcsync/pcsync/pkg/egressproxy/inject"
)

// The controller reads the same from a pod the daemon's pod informer
// slimmed (podinformer.Slim) as from the whole pod.
func TestSlimPodKeepsWhatTheControllerReads(t *testing.T) {
	now := metav1.Now()
	hash := "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
	}{
		{name: "a run's pod", pod: &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "run-1", Namespace: "acme", UID: "u1", ResourceVersion: "7",
				Labels:        map[string]string{agentpod.LabelRole: agentpod.RoleAgent},
				Annotations:   map[string]string{agentpod.AnnotationTokenHash: hash},
				ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kube-controller-manager", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{}}`)}}}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "agent", Image: "pcsync-agent-claude:dev",
				Env: []corev1.EnvVar{{Name: "HOME", Value: "/home/agent"}}}}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.7",
				ContainerStatuses: []corev1.ContainerStatus{{Name: "agent", Ready: true}}},
		}},
		{name: "a proxy pod being deleted", pod: &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "proxy-1", Namespace: "acme", DeletionTimestamp: &now,
				Labels:      map[string]string{agentpod.LabelRole: agentpod.RoleEgressProxy},
				Annotations: map[string]string{inject.AnnotationKey(hash): hash + " 10.0.0.7"}},
			Spec:   corev1.PodSpec{Containers: []corev1.Container{{Name: "proxy"}}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.9"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			whole := tc.pod.DeepCopy()
			got, err := podinformer.Slim(tc.pod)
			if err != nil {
				t.Fatal(err)
			}
			slim := got.(*corev1.Pod)
			type reads struct {
				Proxy, Ended bool
				Tokens, Hash string
			}
			read := func(p *corev1.Pod) reads {
				return reads{isProxy(p), ended(p), tokenAnnotations(p), p.Annotations[agentpod.AnnotationTokenHash]}
			}
			if diff := cmp.Diff(read(whole), read(slim)); diff != "" {
				t.Errorf("what the controller reads (-whole +cached):\n%s", diff)
			}
		})
	}
}
