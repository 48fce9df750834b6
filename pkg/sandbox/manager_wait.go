package sandbox

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/pcsync/pcsync/internal/lib/agentpod"
	"github.com/pcsync/pcsync/internal/lib/podwait"
	"github.com/pcsync/pcsync/pkg/config"
	"github.com/pcsync/pcsync/pkg/podsched"
	"github.com/pcsync/pcsync/pkg/sandbox/leasepod"
)

// waitRunning waits until the pod runs, or fails with the reason the
// kubelet gives (an image that cannot be pulled fails at once); when ctx
// ends first, the refusal says what the pod waits for.
//
// The pod is waited for by name and told by its UID: a pod of the same
// name that went before it (a resumed lease's pod, created once the
// suspended one was gone) may still be seen, and its deletion is not this
// pod's.
func (m *Manager) waitRunning(ctx context.Context, pod *corev1.Pod) error {
	seen := pod.UID == ""
	last, err := podwait.Until(ctx, m.cs, pod.Namespace, pod.Name, func(p *corev1.Pod) (bool, error) {
		switch {
		case p == nil && !seen:
			return false, nil // the earlier pod's deletion
		case p == nil:
			return false, fmt.Errorf("Pod/%s/%s: deleted before it was ready", pod.Namespace, pod.Name)
		case p.UID != pod.UID && pod.UID != "":
			return false, nil // the earlier pod, still seen
		}
		seen = true
		return podRunning(p)
	})
	if err == nil || ctx.Err() == nil {
		return err
	}
	if last == nil {
		last = pod
	}
	if agentpod.Unschedulable(last) != nil {
		return userErrorf(CodePodUnschedulable, "Pod/%s/%s: found no node within the lease's wait (%s): %s",
			pod.Namespace, pod.Name, context.Cause(ctx), agentpod.Reason(last))
	}
	return userErrorf(CodePodNotReady, "Pod/%s/%s: not running after the lease's wait (%s): %s; raise the environment's timeoutMs for slow image pulls",
		pod.Namespace, pod.Name, context.Cause(ctx), agentpod.Reason(last))
}

// podRunning says whether p runs, or why it never will: it ended, an image
// cannot be pulled, or a container cannot be made or started. It runs when
// its main container (leasepod.ContainerName) runs: in a pod with the helper
// container, the pod's phase is Running as soon as the helper runs, even if
// the main container could not start (the hook that copies pcsync failed).
func podRunning(p *corev1.Pod) (bool, error) {
	statuses := append(slices.Clone(p.Status.InitContainerStatuses), p.Status.ContainerStatuses...)
	for _, cs := range statuses {
		if w := cs.State.Waiting; w != nil && agentpod.ImagePullFailed(w.Reason) {
			return false, userErrorf(CodeImagePullFailed, "Pod/%s/%s: container %s cannot pull image %s: %s: %s",
				p.Namespace, p.Name, cs.Name, agentpod.ContainerImage(p, cs.Name), w.Reason, w.Message)
		}
	}
	for _, cs := range statuses {
		if w := cs.State.Waiting; w != nil && (agentpod.WaitingOf(w.Reason) == agentpod.WaitingCreate || w.Reason == reasonPostStartHookError) {
			return false, userErrorf(CodePodNotStarting, "Pod/%s/%s: container %s cannot start: %s: %s", p.Namespace, p.Name, cs.Name, w.Reason, w.Message)
		}
	}
	if why := containersEnded(p); why != "" {
		return false, userErrorf(CodePodNotStarting, "Pod/%s/%s: ended before it was ready: %s", p.Namespace, p.Name, why)
	}
	switch p.Status.Phase {
	case corev1.PodFailed, corev1.PodSucceeded:
		return false, fmt.Errorf("Pod/%s/%s: ended (%s) before it was ready: %s", p.Namespace, p.Name, p.Status.Phase, agentpod.Reason(p))
	case corev1.PodRunning:
		main := agentpod.ContainerStatus(p, leasepod.ContainerName)
		return main != nil && main.State.Running != nil, nil
	}
	return false, nil
}

// reasonPostStartHookError is the kubelet's waiting reason of a container
// whose postStart hook failed (the helper's copy of pcsync).
const reasonPostStartHookError = "PostStartHookError"

// containersEnded names the containers of p that have ended (a lease pod's
// containers never end by themselves while it is acquired; restartPolicy
// Never: they are not restarted), with the kubelet's reason, message and
// exit code; "" when none has.
func containersEnded(p *corev1.Pod) string {
	var ended []string
	for _, cs := range p.Status.ContainerStatuses {
		t := cs.State.Terminated
		if t == nil {
			continue
		}
		ended = append(ended, strings.TrimSpace(fmt.Sprintf("container %s exited %d: %s %s", cs.Name, t.ExitCode, t.Reason, strings.TrimSpace(t.Message))))
	}
	return strings.Join(ended, "; ")
}

// explainUnschedulable adds to a pod_unschedulable refusal what lease r's
// pod asked of its node, and where that comes from in the config.
func explainUnschedulable(err error, model *config.Model, r *leasepod.Record) error {
	var ue *UserError
	if !errors.As(err, &ue) || ue.Code != CodePodUnschedulable {
		return err
	}
	c, ok := model.Company(r.Company)
	if !ok {
		return err
	}
	a, _ := c.Agent(r.Agent)
	from := "the Company's defaults: its agent is none the config declares"
	if a != nil {
		from = "agent " + a.Name + "'s nodeSelector and tolerations, the Company's runtimeClassName"
	}
	return &UserError{Code: ue.Code, Message: fmt.Sprintf("%s; it needs %s (%s)", ue.Message, podsched.For(c, a), from)}
}
