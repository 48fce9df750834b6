package leasepod

import (
	"cmp"
	"fmt"
	"math"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/pcsync/pcsync/internal/lib/agentpod"
	"github.com/pcsync/pcsync/pkg/adapters"
	"github.com/pcsync/pcsync/pkg/config"
	"github.com/pcsync/pcsync/pkg/egressproxy/agentenv"
	"github.com/pcsync/pcsync/pkg/podsched"
	"github.com/pcsync/pcsync/pkg/podsec"
)

// Labels and annotations of a lease pod, besides agentpod's managed-by,
// company and role labels (role "agent": the tenant's egress policy applies).
const (
	// LabelLease is the lease id (the pod's name).
	LabelLease = "pcsync.io/sandbox-lease"
	// AnnotationExpiresAt is the lease's expiry, RFC 3339.
	AnnotationExpiresAt = "pcsync.io/expires-at"
	// AnnotationEnvironment is the Paperclip environment id.
	AnnotationEnvironment = "paperclip.io/environment-id"
)

// BuildPod returns the lease's pod: the image runs pcsync's command server
// as its PID 1 (its own binary in pcsync's images, else one copied in by
// the postStart hook of a helper container of the record's HelperImage,
// see addServerHelper), hardened as an agent Job's
// pod is (podsec: Pod Security "restricted", non-root, no service-account
// token, read-only root filesystem, every capability dropped, seccomp
// RuntimeDefault), requests and limits from the company's agent defaults,
// and emptyDirs for the workspace, HOME, /tmp and the command server's
// socket (a kept lease's workspace and HOME are on its claim instead). It
// runs where the record's Agent's Jobs run (podsched.For: the agent's node
// selector and tolerations, the company's runtime class), or with the
// company's defaults when the record names no agent.
// activeDeadlineSeconds ends it at the lease's expiry even if no pcsync is
// left to delete it. No env value and no secret is in the spec: each
// execute brings its own env over the command stream.
func BuildPod(l *Record, m *config.Model) (*corev1.Pod, error) {
	c, ok := m.Company(l.Company)
	if !ok {
		return nil, fmt.Errorf("Pod/%s/%s: no Company %q in the config", l.Namespace, l.ID, l.Company)
	}
	res, err := podsched.Resources(m.Settings.Spec.Defaults.Resources)
	if err != nil {
		return nil, fmt.Errorf("Pod/%s/%s: resources: %w", l.Namespace, l.ID, err)
	}
	hard, err := podsec.For(podsec.DefaultServiceAccount, podsec.DefaultUID, m.Jobs(c).EmptyDirSizeLimit)
	if err != nil {
		return nil, fmt.Errorf("Pod/%s/%s: %w", l.Namespace, l.ID, err)
	}
	deadline := max(int64(math.Ceil(time.Until(l.ExpiresAt).Seconds())), 1)
	var agent *config.Agent
	if l.Agent != "" {
		if agent, ok = c.Agent(l.Agent); !ok {
			return nil, fmt.Errorf("Pod/%s/%s: Company %s declares no agent %q", l.Namespace, l.ID, c.Slug(), l.Agent)
		}
	}
	pod := &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: l.ID, Namespace: l.Namespace, Labels: Labels(l, c), Annotations: Annotations(l)},
		Spec: corev1.PodSpec{
			ActiveDeadlineSeconds:         ptr.To(deadline),
			TerminationGracePeriodSeconds: ptr.To(int64(5)),
			ImagePullSecrets:              podsec.PullSecrets(m.ImagePullSecrets(c)),
			Containers: []corev1.Container{{
				Name:  ContainerName,
				Image: l.Image,
				// The command server is PID 1: it reaps every orphan the
				// agent's commands leave (the callback bridge's nohup).
				Command:    []string{cmp.Or(l.Server, DefaultServerPath), "sandbox-server", "serve", "--socket", l.Socket},
				WorkingDir: PodWorkspace,
				Env: []corev1.EnvVar{
					{Name: "HOME", Value: PodHome},
					{Name: "TMPDIR", Value: "/tmp"},
				},
				Resources: res,
				VolumeMounts: []corev1.VolumeMount{
					{Name: "workspace", MountPath: PodWorkspace},
					{Name: "home", MountPath: PodHome},
					{Name: "tmp", MountPath: "/tmp"},
					{Name: "run", MountPath: PodRunDir},
				},
				TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
			}},
			Volumes: []corev1.Volume{hard.EmptyDir("workspace"), hard.EmptyDir("home"), hard.EmptyDir("tmp"), hard.EmptyDir("run")},
		},
	}
	if l.Keep != nil {
		keepOnClaim(pod, l.ID)
	}
	if adapters.Type(l.AdapterType) == adapters.CodexLocal {
		// codex's system config, written by the daemon when the lease
		// uses a credential (writeCodexConfig): on the run emptyDir, as
		// the root filesystem is read-only.
		main := &pod.Spec.Containers[0]
		main.VolumeMounts = append(main.VolumeMounts, corev1.VolumeMount{Name: "run", MountPath: adapters.CodexSystemConfigDir, SubPath: "etc-codex"})
	}
	// Where the pod runs: as the agent's Jobs (its node selector and
	// tolerations, the company's runtime class), or the company's defaults.
	podsched.For(c, agent).Apply(&pod.Spec)
	if m.EgressMode(c) == config.EgressProxy {
		// The proxy resolves every name the lease's commands reach; the
		// pod has no DNS channel of its own. Paperclip is reached through
		// the execute stream (its callback bridge), not by a name.
		agentenv.NoClusterDNS(&pod.Spec, nil)
	}
	if l.Server == "" {
		if err := addServerHelper(&pod.Spec, l.HelperImage, m.LimitRange(c)); err != nil {
			return nil, fmt.Errorf("Pod/%s/%s: %w", l.Namespace, l.ID, err)
		}
		pod.Spec.Volumes = append(pod.Spec.Volumes, hard.EmptyDir(helperVolume))
	}
	// Hardened as an agent Job's pod, helper container included.
	hard.Apply(&pod.Spec)
	return pod, nil
}

// Labels are a lease pod's labels: pcsync's and the tenant's (role agent,
// so the company's egress policy applies), and what the lease is for.
func Labels(l *Record, c *config.Company) map[string]string {
	labels := map[string]string{
		agentpod.LabelManagedBy: agentpod.ManagedByValue,
		agentpod.LabelCompany:   agentpod.LabelValue(c.Slug()),
		agentpod.LabelCompanyID: agentpod.LabelValue(c.Spec.ID),
		agentpod.LabelRole:      agentpod.RoleAgent,
		LabelLease:              l.ID,
	}
	if l.AdapterType != "" {
		labels[agentpod.LabelAdapter] = agentpod.LabelValue(l.AdapterType)
	}
	if l.RunID != "" {
		labels[agentpod.LabelRunID] = agentpod.LabelValue(l.RunID)
	}
	if l.AgentID != "" {
		labels[agentpod.LabelAgentID] = agentpod.LabelValue(l.AgentID)
	}
	if l.Agent != "" {
		labels[agentpod.LabelAgent] = agentpod.LabelValue(l.Agent)
	}
	return labels
}

// Annotations are a lease pod's annotations: its expiry, its default
// container and its Paperclip environment.
func Annotations(l *Record) map[string]string {
	annotations := map[string]string{
		AnnotationExpiresAt:                       l.ExpiresAt.UTC().Format(time.RFC3339),
		"kubectl.kubernetes.io/default-container": ContainerName,
	}
	if l.EnvironmentID != "" {
		annotations[AnnotationEnvironment] = l.EnvironmentID
	}
	return annotations
}
