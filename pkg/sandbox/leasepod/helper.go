package leasepod

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/pcsync/pcsync/pkg/config"
	"github.com/pcsync/pcsync/pkg/images"
	"github.com/pcsync/pcsync/pkg/podsched"
)

// HelperContainerName is the helper container of a lease pod whose image
// does not hold pcsync: the first of the pod's containers.
const HelperContainerName = "pcsync-bin"

// helperVolume is the emptyDir the helper fills with pcsync.
const helperVolume = "pcsync-bin"

// helperResources are the helper container's own requests and limits
// (config.SandboxHelperResources, which the config's warm pool quota check
// counts too), each raised to the
// tenant LimitRange's min so that admission passes (and the limits to at
// least the requests): the helper only blocks on a signal once its hook
// has copied pcsync (a Go process of a few MiB that writes nothing but its
// copy to the emptyDir). The hook's copy of pcsync (about 65 MiB, some
// 60 ms of CPU) runs in the helper's cgroup: at a CPU limit of 100m the
// CFS quota stretched it to about a second on the real node, during which
// the kubelet starts no other container, so the CPU limit is 500m while
// the request stays at the floor. The ephemeral storage, set so that the
// LimitRange's default (10Gi) does not count against the tenant's
// limits.ephemeral-storage quota, covers the container's logs.
func helperResources() corev1.ResourceRequirements {
	r, err := podsched.Resources(config.SandboxHelperResources())
	if err != nil {
		panic(err) // constant quantities
	}
	return r
}

// addServerHelper gives a pod whose image does not hold pcsync (spec's
// only container) pcsync's command server without an init container: an
// init container's exit is seen only at the kubelet's next relist (PLEG,
// every second), then the main container starts and is seen running at
// the relist after, a second more. Instead, a first regular container of
// pcsync's image (helperImage) runs `pcsync sandbox-server hold`, and its
// postStart hook copies pcsync into the shared emptyDir. The kubelet
// starts a pod's containers in their order in one sync and runs each
// postStart hook before it starts the next container
// (kuberuntime_manager.go SyncPod, kuberuntime_container.go
// startContainer), so the main container, second, starts with pcsync in
// place and both are seen running at the same relist. Should the hook
// fail, the kubelet kills the helper and the main container cannot exec
// pcsync: with restartPolicy Never the pod fails, and podRunning ends the
// acquire with the containers' reasons. The caller adds the emptyDir
// (helperVolume).
func addServerHelper(spec *corev1.PodSpec, helperImage string, lr config.LimitRange) error {
	base := helperResources()
	requests, err := helperResourcesWithin(base.Requests, lr)
	if err != nil {
		return err
	}
	limits, _ := helperResourcesWithin(base.Limits, lr) // lr parsed above
	for name, q := range requests {
		if q.Cmp(limits[name]) > 0 {
			limits[name] = q.DeepCopy()
		}
	}
	helper := corev1.Container{
		Name:    HelperContainerName,
		Image:   helperImage,
		Command: []string{images.ServerPath, "sandbox-server", "hold"},
		Lifecycle: &corev1.Lifecycle{PostStart: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{
			Command: []string{images.ServerPath, "sandbox-server", "install", DefaultServerPath},
		}}},
		Resources:                corev1.ResourceRequirements{Requests: requests, Limits: limits},
		VolumeMounts:             []corev1.VolumeMount{{Name: helperVolume, MountPath: PodBinDir}},
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
	}
	spec.Containers[0].VolumeMounts = append(spec.Containers[0].VolumeMounts,
		corev1.VolumeMount{Name: helperVolume, MountPath: PodBinDir, ReadOnly: true})
	spec.Containers = append([]corev1.Container{helper}, spec.Containers...)
	return nil
}

// helperResourcesWithin is base, each quantity raised to the LimitRange's
// min where that is higher.
func helperResourcesWithin(base corev1.ResourceList, lr config.LimitRange) (corev1.ResourceList, error) {
	out := corev1.ResourceList{}
	for name, q := range base {
		out[name] = q.DeepCopy()
	}
	if lr.Min == nil {
		return out, nil
	}
	for _, m := range []struct {
		name corev1.ResourceName
		v    *config.Quantity
	}{{corev1.ResourceCPU, lr.Min.CPU}, {corev1.ResourceMemory, lr.Min.Memory}, {corev1.ResourceEphemeralStorage, lr.Min.EphemeralStorage}} {
		if m.v == nil {
			continue
		}
		min, err := resource.ParseQuantity(string(*m.v))
		if err != nil {
			return nil, fmt.Errorf("LimitRange min %s %q: %w", m.name, string(*m.v), err)
		}
		if min.Cmp(out[m.name]) > 0 {
			out[m.name] = min
		}
	}
	return out, nil
}
