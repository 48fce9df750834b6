package podinformer

import (
	corev1 "k8s.io/api/core/v1"
)

// Slim is the informer's transform: with a thousand runs in flight, whole
// pods (their specs, managed fields) would be most of the daemon's
// memory. It keeps what any consumer reads of a pod:
//
//   - its metadata but managed fields: names, UID, resourceVersion,
//     labels and annotations (roles, pools, owners, token hashes),
//     owner references (a run pod's Job), creation and deletion;
//   - of its spec, the containers' and init containers' names and images
//     (the run's explanations name the image that does not pull), the
//     node, and activeDeadlineSeconds (a warm pool member's claim lowers
//     it);
//   - of its status, the phase, reason and message, conditions (Ready,
//     unschedulable, disruption), IP (a token's binding), start time and
//     the containers' states (how a run ended), without what no one reads
//     (resources, volume mounts, users, host IPs).
//
// A second Slim of a slimmed pod changes nothing.
func Slim(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	p.ManagedFields = nil
	p.Spec = corev1.PodSpec{
		InitContainers:        containers(p.Spec.InitContainers),
		Containers:            containers(p.Spec.Containers),
		NodeName:              p.Spec.NodeName,
		ActiveDeadlineSeconds: p.Spec.ActiveDeadlineSeconds,
	}
	s := p.Status
	p.Status = corev1.PodStatus{
		Phase: s.Phase, Reason: s.Reason, Message: s.Message, Conditions: s.Conditions,
		PodIP: s.PodIP, StartTime: s.StartTime,
		InitContainerStatuses: statuses(s.InitContainerStatuses),
		ContainerStatuses:     statuses(s.ContainerStatuses),
	}
	return p, nil
}

// containers are cs's names and images.
func containers(cs []corev1.Container) []corev1.Container {
	if cs == nil {
		return nil
	}
	out := make([]corev1.Container, len(cs))
	for i, c := range cs {
		out[i] = corev1.Container{Name: c.Name, Image: c.Image}
	}
	return out
}

// statuses are ss without the containers' resources, volume mounts and
// users.
func statuses(ss []corev1.ContainerStatus) []corev1.ContainerStatus {
	if ss == nil {
		return nil
	}
	out := make([]corev1.ContainerStatus, len(ss))
	for i, s := range ss {
		out[i] = corev1.ContainerStatus{Name: s.Name, State: s.State, LastTerminationState: s.LastTerminationState,
			Ready: s.Ready, RestartCount: s.RestartCount, Image: s.Image, ImageID: s.ImageID, ContainerID: s.ContainerID,
			Started: s.Started}
	}
	return out
}
