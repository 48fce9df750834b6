package podsec_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	"github.com/pcsync/pcsync/pkg/config"
	"github.com/pcsync/pcsync/pkg/podsec"
)

// TestApply: every hardened field of the pod and of each container, init
// containers included, is set, whatever it held before.
func TestApply(t *testing.T) {
	h, err := podsec.For("tenant-sa", 1234, nil)
	if err != nil {
		t.Fatal(err)
	}
	spec := corev1.PodSpec{
		ServiceAccountName:           "default",
		AutomountServiceAccountToken: ptr.To(true),
		RestartPolicy:                corev1.RestartPolicyAlways,
		InitContainers:               []corev1.Container{{Name: "init", ImagePullPolicy: corev1.PullAlways}},
		Containers: []corev1.Container{{Name: "main", SecurityContext: &corev1.SecurityContext{
			Privileged: ptr.To(true), Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"SYS_ADMIN"}},
		}}},
	}
	h.Apply(&spec)
	container := podsec.ContainerFields{
		SecurityContext: &corev1.SecurityContext{
			AllowPrivilegeEscalation: ptr.To(false),
			Privileged:               ptr.To(false),
			ReadOnlyRootFilesystem:   ptr.To(true),
			RunAsNonRoot:             ptr.To(true),
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
			SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		},
		ImagePullPolicy: corev1.PullIfNotPresent,
	}
	want := podsec.Fields{
		ServiceAccountName:           "tenant-sa",
		AutomountServiceAccountToken: ptr.To(false),
		EnableServiceLinks:           ptr.To(false),
		RestartPolicy:                corev1.RestartPolicyNever,
		SecurityContext: &corev1.PodSecurityContext{
			RunAsNonRoot:        ptr.To(true),
			RunAsUser:           ptr.To(int64(1234)),
			RunAsGroup:          ptr.To(int64(1234)),
			FSGroup:             ptr.To(int64(1234)),
			FSGroupChangePolicy: ptr.To(corev1.FSGroupChangeOnRootMismatch),
			SeccompProfile:      &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		},
		Containers: []podsec.ContainerFields{container, container},
	}
	if diff := cmp.Diff(want, podsec.Of(&spec)); diff != "" {
		t.Errorf("hardened fields (-want +got):\n%s", diff)
	}
	if spec.InitContainers[0].SecurityContext == spec.Containers[0].SecurityContext {
		t.Error("the containers share one security context: editing one would edit both")
	}
}

// TestEmptyDir: each emptyDir is capped at the company's size limit, or
// not at all; a limit that is no quantity fails For.
func TestEmptyDir(t *testing.T) {
	q := func(s string) *config.Quantity { v := config.Quantity(s); return &v }
	tests := []struct {
		name    string
		limit   *config.Quantity
		want    *resource.Quantity
		wantErr string
	}{
		{"no limit", nil, nil, ""},
		{"limit", q("2Gi"), ptr.To(resource.MustParse("2Gi")), ""},
		{"not a quantity", q("lots"), nil, `jobs.emptyDirSizeLimit "lots": `},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, err := podsec.For(podsec.DefaultServiceAccount, podsec.DefaultUID, tt.limit)
			if tt.wantErr != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tt.wantErr) {
					t.Fatalf("For: %v, want an error starting %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := corev1.Volume{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: tt.want}}}
			if diff := cmp.Diff(want, h.EmptyDir("tmp")); diff != "" {
				t.Errorf("EmptyDir (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPullSecrets(t *testing.T) {
	want := []corev1.LocalObjectReference{{Name: "a"}, {Name: "b"}}
	if diff := cmp.Diff(want, podsec.PullSecrets([]string{"a", "b"})); diff != "" {
		t.Errorf("PullSecrets (-want +got):\n%s", diff)
	}
	if got := podsec.PullSecrets(nil); got != nil {
		t.Errorf("PullSecrets(nil) = %v, want nil (no imagePullSecrets field)", got)
	}
}
