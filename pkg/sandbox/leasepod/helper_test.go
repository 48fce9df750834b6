package leasepod

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/pcsync/pcsync/pkg/config"
	"github.com/pcsync/pcsync/pkg/images"
	"github.com/pcsync/pcsync/pkg/sandbox/internal/sandboxtest"
)

// helperModel is a company acme with the default LimitRange and a company
// big whose LimitRange min is above the helper's own resources.
func helperModel(t *testing.T) *config.Model {
	t.Helper()
	files := map[string]string{
		"settings.yaml": "apiVersion: pcsync.io/v1alpha1\nkind: Settings\nmetadata: {name: s}\nspec: {}\n",
		"acme.yaml":     "apiVersion: pcsync.io/v1alpha1\nkind: Company\nmetadata: {name: acme}\nspec:\n  id: acme-id\n",
		"big.yaml": "apiVersion: pcsync.io/v1alpha1\nkind: Company\nmetadata: {name: big}\nspec:\n  id: big-id\n" +
			"  limitRange: {min: {cpu: 200m, memory: 256Mi, ephemeralStorage: 100Mi}}\n",
	}
	return sandboxtest.LoadModel(t, files)
}

// helperShape is what a test compares of a lease pod's containers.
type helperShape struct {
	Containers     []string
	InitContainers int
	Default        string
	HelperCommand  []string
	PostStart      []string
	HelperMounts   []corev1.VolumeMount
	MainMount      *corev1.VolumeMount
	MainCommand0   string
	Requests       map[corev1.ResourceName]string
	Limits         map[corev1.ResourceName]string
}

func shapeOf(pod *corev1.Pod) helperShape {
	s := helperShape{InitContainers: len(pod.Spec.InitContainers), Default: pod.Annotations["kubectl.kubernetes.io/default-container"]}
	quantities := func(rl corev1.ResourceList) map[corev1.ResourceName]string {
		out := map[corev1.ResourceName]string{}
		for k, v := range rl {
			out[k] = v.String()
		}
		return out
	}
	for _, c := range pod.Spec.Containers {
		s.Containers = append(s.Containers, c.Name)
		switch c.Name {
		case HelperContainerName:
			s.HelperCommand, s.HelperMounts = c.Command, c.VolumeMounts
			if c.Lifecycle != nil && c.Lifecycle.PostStart != nil && c.Lifecycle.PostStart.Exec != nil {
				s.PostStart = c.Lifecycle.PostStart.Exec.Command
			}
			s.Requests, s.Limits = quantities(c.Resources.Requests), quantities(c.Resources.Limits)
		case ContainerName:
			s.MainCommand0 = c.Command[0]
			for i, m := range c.VolumeMounts {
				if m.Name == helperVolume {
					s.MainMount = &c.VolumeMounts[i]
				}
			}
		}
	}
	return s
}

// TestLeasePodHelper: a lease of an image without pcsync gets it from a
// first, regular container of pcsync's image whose postStart hook copies
// it into an emptyDir the main container (second, the default container)
// mounts read-only and runs as PID 1; the helper's requests and limits
// are small (a CPU limit of 500m for the hook's copy), each raised to the
// LimitRange's min; a lease of pcsync's own image has no helper.
func TestLeasePodHelper(t *testing.T) {
	m := helperModel(t)
	helper := func(requests, limits map[corev1.ResourceName]string) helperShape {
		return helperShape{
			Containers:    []string{HelperContainerName, ContainerName},
			Default:       ContainerName,
			HelperCommand: []string{images.ServerPath, "sandbox-server", "hold"},
			PostStart:     []string{images.ServerPath, "sandbox-server", "install", DefaultServerPath},
			HelperMounts:  []corev1.VolumeMount{{Name: helperVolume, MountPath: PodBinDir}},
			MainMount:     &corev1.VolumeMount{Name: helperVolume, MountPath: PodBinDir, ReadOnly: true},
			MainCommand0:  DefaultServerPath,
			Requests:      requests,
			Limits:        limits,
		}
	}
	tests := []struct {
		name, company, server string
		want                  helperShape
	}{
		{"pcsync in the image: no helper", "acme", images.ServerPath, helperShape{
			Containers: []string{ContainerName}, Default: ContainerName, MainCommand0: images.ServerPath}},
		{"the default LimitRange", "acme", "", helper(
			map[corev1.ResourceName]string{corev1.ResourceCPU: "100m", corev1.ResourceMemory: "128Mi", corev1.ResourceEphemeralStorage: "64Mi"},
			map[corev1.ResourceName]string{corev1.ResourceCPU: "500m", corev1.ResourceMemory: "128Mi", corev1.ResourceEphemeralStorage: "64Mi"})},
		{"raised to the company's LimitRange min", "big", "", helper(
			map[corev1.ResourceName]string{corev1.ResourceCPU: "200m", corev1.ResourceMemory: "256Mi", corev1.ResourceEphemeralStorage: "100Mi"},
			map[corev1.ResourceName]string{corev1.ResourceCPU: "500m", corev1.ResourceMemory: "256Mi", corev1.ResourceEphemeralStorage: "100Mi"})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, _ := m.Company(tt.company)
			l := &Record{ID: "pcsync-sbx-1", Namespace: m.Namespace(c), Company: tt.company, Image: "img", Server: tt.server,
				HelperImage: "reg/pcsync:1", Socket: "/run/pcsync/s.sock", ExpiresAt: time.Now().Add(time.Hour)}
			pod, err := BuildPod(l, m)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, shapeOf(pod)); diff != "" {
				t.Errorf("lease pod (-want +got):\n%s", diff)
			}
			if tt.server == "" && pod.Spec.Containers[0].Image != "reg/pcsync:1" {
				t.Errorf("helper image %s, want the record's reg/pcsync:1", pod.Spec.Containers[0].Image)
			}
		})
	}
}

// TestHelperResourcesWithin: a LimitRange min that does not parse is an
// error naming it.
func TestHelperResourcesWithin(t *testing.T) {
	bad := config.Quantity("lots")
	_, err := helperResourcesWithin(helperResources().Requests, config.LimitRange{Min: &config.ResourceList{CPU: &bad}})
	if err == nil || err.Error() != `LimitRange min cpu "lots": quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'` {
		t.Errorf("err %v", err)
	}
}
