package agentpod

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Waiting is what a container's waiting reason says of its start.
type Waiting int

const (
	// WaitingNormal: the container is not waiting, or waits for what
	// passes by itself (ContainerCreating, PodInitializing, a back-off).
	WaitingNormal Waiting = iota
	// WaitingImagePull: its image will not arrive (the kubelet's pull
	// failed, or cannot be tried).
	WaitingImagePull
	// WaitingCreate: the container cannot be made
	// (CreateContainerConfigError, CreateContainerError); a Secret or
	// ConfigMap it needs may still come.
	WaitingCreate
	// WaitingRun: the runtime made the container but could not start it
	// (RunContainerError).
	WaitingRun
)

// waitingReasons are the kubelet's waiting reasons that mean a container
// will not start by itself, or not soon.
var waitingReasons = map[string]Waiting{
	"ErrImagePull":               WaitingImagePull,
	"ImagePullBackOff":           WaitingImagePull,
	"InvalidImageName":           WaitingImagePull,
	"ErrImageNeverPull":          WaitingImagePull,
	"RegistryUnavailable":        WaitingImagePull,
	"SignatureValidationFailed":  WaitingImagePull,
	"CreateContainerConfigError": WaitingCreate,
	"CreateContainerError":       WaitingCreate,
	"RunContainerError":          WaitingRun,
}

// WaitingOf reads a container's waiting reason.
func WaitingOf(reason string) Waiting { return waitingReasons[reason] }

// ImagePullFailed reports whether a container's waiting reason means that
// its image will not arrive.
func ImagePullFailed(reason string) bool { return WaitingOf(reason) == WaitingImagePull }

// ContainerStatus is the status of p's container (not init container)
// name, or nil when p is nil or has none yet.
func ContainerStatus(p *corev1.Pod, name string) *corev1.ContainerStatus {
	if p == nil {
		return nil
	}
	for i := range p.Status.ContainerStatuses {
		if p.Status.ContainerStatuses[i].Name == name {
			return &p.Status.ContainerStatuses[i]
		}
	}
	return nil
}

// ContainerImage is the image of p's container or init container name, as
// p's spec gives it, or "".
func ContainerImage(p *corev1.Pod, name string) string {
	for _, c := range append(p.Spec.InitContainers, p.Spec.Containers...) {
		if c.Name == name {
			return c.Image
		}
	}
	return ""
}

// Condition is p's condition of type t (whatever its status), or nil.
func Condition(p *corev1.Pod, t corev1.PodConditionType) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == t {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

// Unschedulable is p's PodScheduled condition when the scheduler found no
// node for p, else nil.
func Unschedulable(p *corev1.Pod) *corev1.PodCondition {
	c := Condition(p, corev1.PodScheduled)
	if c == nil || c.Status != corev1.ConditionFalse || c.Reason != corev1.PodReasonUnschedulable {
		return nil
	}
	return c
}

// Ready says p runs, is not being deleted, and is Ready.
func Ready(p *corev1.Pod) bool {
	if p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil {
		return false
	}
	c := Condition(p, corev1.PodReady)
	return c != nil && c.Status == corev1.ConditionTrue
}

// Reason tells in words why p is where it is: its own reason and message,
// and the message of each condition not true; else its phase.
func Reason(p *corev1.Pod) string {
	var parts []string
	if p.Status.Reason != "" || p.Status.Message != "" {
		parts = append(parts, strings.TrimSpace(p.Status.Reason+" "+p.Status.Message))
	}
	for _, c := range p.Status.Conditions {
		if c.Status != corev1.ConditionTrue && c.Message != "" {
			parts = append(parts, string(c.Type)+": "+c.Message)
		}
	}
	if len(parts) == 0 {
		return "phase " + string(p.Status.Phase)
	}
	return strings.Join(parts, "; ")
}
