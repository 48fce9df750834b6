package doctor

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/pcsync/pcsync/internal/lib/agentpod"
	"github.com/pcsync/pcsync/internal/lib/podwait"
	"github.com/pcsync/pcsync/internal/netprobe"
	"github.com/pcsync/pcsync/pkg/config"
	"github.com/pcsync/pcsync/pkg/images"
	"github.com/pcsync/pcsync/pkg/podsched"
	"github.com/pcsync/pcsync/pkg/podsec"
)

// Labels of the probe pod, besides the agent's role and company labels.
const (
	// LabelProbe marks the network check's probe pod (value ProbeLabelNetwork).
	LabelProbe = "pcsync.io/probe"
	// ProbeLabelNetwork is LabelProbe's value on the network check's pod.
	ProbeLabelNetwork = "network"
	// hostIPEnv holds the pod's node IP (downward API status.hostIP); the
	// probe's arguments refer to it as $(PCSYNC_HOST_IP).
	hostIPEnv = "PCSYNC_HOST_IP"
	// probeContainer is the probe pod's one container.
	probeContainer = "netprobe"
)

// buildProbePod returns the probe pod of company c in namespace ns: pcsync's
// image running `pcsync netprobe` against its own node's IP on each of
// kubeletPorts, and targets, labelled as an agent of c so that the tenant's
// NetworkPolicies select it, hardened as c's agent pods are (podsec),
// scheduled as its first agent's (podsched), with c's pull Secrets and without resources of its
// own (the tenant's LimitRange gives its defaults).
func buildProbePod(m *config.Model, c *config.Company, ns string, kubeletPorts []int, targets []string, opts NetworkOptions) (*corev1.Pod, error) {
	hard, err := podsec.For(podsec.DefaultServiceAccount, podsec.DefaultUID, m.Jobs(c).EmptyDirSizeLimit)
	if err != nil {
		return nil, fmt.Errorf("probe pod in %s: %w", ns, err)
	}
	var all []string
	for _, p := range kubeletPorts {
		all = append(all, "$("+hostIPEnv+"):"+strconv.Itoa(p))
	}
	all = append(all, targets...)
	deadline := int64(opts.Timeout/time.Second) + 30
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: "pcsync-netprobe-",
			Namespace:    ns,
			Labels: map[string]string{
				agentpod.LabelRole:      agentpod.RoleAgent,
				agentpod.LabelCompany:   agentpod.LabelValue(c.Slug()),
				agentpod.LabelCompanyID: agentpod.LabelValue(c.Spec.ID),
				LabelProbe:              ProbeLabelNetwork,
			},
		},
		Spec: corev1.PodSpec{
			ActiveDeadlineSeconds:         ptr.To(deadline),
			TerminationGracePeriodSeconds: ptr.To(int64(1)),
			ImagePullSecrets:              podsec.PullSecrets(m.ImagePullSecrets(c)),
			Containers: []corev1.Container{{
				Name:  probeContainer,
				Image: m.BuiltinImage(images.Pcsync),
				Command: []string{images.ServerPath, "netprobe", "--connect", strings.Join(all, ","), "--timeout", opts.ConnectTimeout.String(),
					"--settle", opts.Settle.String(), "--attempts", strconv.Itoa(opts.Attempts), "--interval", opts.Interval.String()},
				Env: []corev1.EnvVar{{Name: hostIPEnv, ValueFrom: &corev1.EnvVarSource{
					FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.hostIP"}}}},
				TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
			}},
		},
	}
	// Where the company's first agent runs (its node selector and
	// tolerations), else the company's defaults.
	var agent *config.Agent
	if len(c.Spec.Agents) > 0 {
		agent = &c.Spec.Agents[0]
	}
	podsched.For(c, agent).Apply(&pod.Spec)
	hard.Apply(&pod.Spec)
	return pod, nil
}

// runProbePod creates pod, waits (within ctx) for its probe's report, and
// deletes it whatever happened. It returns the report and the pod as last
// seen, or why there is no report.
func runProbePod(ctx context.Context, cs kubernetes.Interface, pod *corev1.Pod) (netprobe.Report, *corev1.Pod, error) {
	created, err := cs.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		return netprobe.Report{}, nil, fmt.Errorf("creating the probe pod in %s: %w", pod.Namespace, err)
	}
	ref := "Pod/" + created.Namespace + "/" + created.Name
	defer func() {
		// The probe pod goes whatever happened, even once ctx ended.
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
		defer cancel()
		_ = cs.CoreV1().Pods(created.Namespace).Delete(dctx, created.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))})
	}()
	last, err := podwait.Until(ctx, cs, created.Namespace, created.Name, probeDone)
	if err != nil {
		return netprobe.Report{}, last, fmt.Errorf("%s did not report: %w%s", ref, err, podState(last))
	}
	msg := terminationMessage(last)
	rep, err := netprobe.Parse(msg)
	if err != nil {
		return rep, last, fmt.Errorf("%s ended (%s) without a report: %w", ref, last.Status.Phase, err)
	}
	return rep, last, nil
}

// probeDone says the probe pod has ended, or fails the wait when it is gone
// or its container cannot start.
func probeDone(p *corev1.Pod) (bool, error) {
	if p == nil {
		return false, fmt.Errorf("it was deleted")
	}
	if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return true, nil
	}
	for _, s := range p.Status.ContainerStatuses {
		if w := s.State.Waiting; w != nil && agentpod.WaitingOf(w.Reason) != agentpod.WaitingNormal {
			return false, fmt.Errorf("its container cannot start: %s: %s", w.Reason, w.Message)
		}
	}
	return false, nil
}

// terminationMessage is the probe container's termination message.
func terminationMessage(p *corev1.Pod) string {
	for _, s := range p.Status.ContainerStatuses {
		if s.Name == probeContainer && s.State.Terminated != nil {
			return s.State.Terminated.Message
		}
	}
	return ""
}

// podState describes a pod that has not reported: its phase, node and why
// its container waits.
func podState(p *corev1.Pod) string {
	if p == nil {
		return ""
	}
	s := fmt.Sprintf(" (phase %s", p.Status.Phase)
	if p.Spec.NodeName != "" {
		s += " on node " + p.Spec.NodeName
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status != corev1.ConditionTrue && c.Message != "" {
			s += ", not scheduled: " + c.Message
		}
	}
	for _, cs := range p.Status.ContainerStatuses {
		if w := cs.State.Waiting; w != nil && w.Reason != "" {
			s += ", container waiting: " + w.Reason
		}
	}
	if p.Status.Phase == corev1.PodRunning {
		s += "; a node that runs no containers, as kwok's, never lets it report"
	}
	return s + ")"
}
