package sandbox

import (
	"cmp"
	"fmt"
	"math"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/pcsync/pcsync/pkg/config"
	"github.com/pcsync/pcsync/pkg/podsched"
	"github.com/pcsync/pcsync/pkg/runs/kubeexec"
)

// Labels and annotations of a lease pod, besides kubeexec's managed-by,
// company and role labels (role "agent": the tenant's egress policy applies).
const (
	// LabelLease is the lease id (the pod's name).
	LabelLease = "pcsync.io/sandbox-lease"
	// AnnotationExpiresAt is the lease's expiry, RFC 3339.
	AnnotationExpiresAt = "pcsync.io/expires-at"
	// AnnotationEnvironment is the Paperclip environment id.
	AnnotationEnvironment = "paperclip.io/environment-id"
)

// uid is the user and group a lease pod runs as.
const uid = 1000

// BuildPod returns the lease's pod: the image runs pcsync's command server
// as its PID 1 (its own binary in pcsync's images, else one copied in by an
// init container of the record's HelperImage), hardened like an agent Job's
// pod to pass Pod Security "restricted": non-root, no service-account
// token, read-only root filesystem, every capability dropped, seccomp
// RuntimeDefault, requests and limits from the company's agent defaults,
// and emptyDirs for the workspace, HOME, /tmp and the command server's
// socket. It runs where the record's Agent's Jobs run (podsched.For: the
// agent's node selector and tolerations, the company's runtime class), or
// with the company's defaults when the record names no agent.
// activeDeadlineSeconds ends it at the lease's expiry even if no pcsync is
// left to delete it. No env value and no secret is in the spec: each
// execute brings its own env over the command stream.
func BuildPod(l *Record, m *config.Model) (*corev1.Pod, error) {
	c, ok := m.Company(l.Company)
	if !ok {
		return nil, fmt.Errorf("Pod/%s/%s: no Company %q in the config", l.Namespace, l.ID, l.Company)
	}
	res, err := kubeexec.ResourceRequirements(m.Settings.Spec.Defaults.Resources)
	if err != nil {
		return nil, fmt.Errorf("Pod/%s/%s: resources: %w", l.Namespace, l.ID, err)
	}
	var sizeLimit *resource.Quantity
	if q := m.Jobs(c).EmptyDirSizeLimit; q != nil {
		parsed, err := resource.ParseQuantity(string(*q))
		if err != nil {
			return nil, fmt.Errorf("Pod/%s/%s: jobs.emptyDirSizeLimit %q: %w", l.Namespace, l.ID, string(*q), err)
		}
		sizeLimit = &parsed
	}
	emptyDir := func(name string) corev1.Volume {
		return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: sizeLimit}}}
	}
	deadline := int64(math.Ceil(time.Until(l.ExpiresAt).Seconds()))
	if deadline < 1 {
		deadline = 1
	}
	var pullSecrets []corev1.LocalObjectReference
	for _, s := range m.ImagePullSecrets(c) {
		pullSecrets = append(pullSecrets, corev1.LocalObjectReference{Name: s})
	}
	var agent *config.Agent
	if l.Agent != "" {
		if agent, ok = c.Agent(l.Agent); !ok {
			return nil, fmt.Errorf("Pod/%s/%s: Company %s declares no agent %q", l.Namespace, l.ID, c.Slug(), l.Agent)
		}
	}
	secure := &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr.To(false),
		Privileged:               ptr.To(false),
		ReadOnlyRootFilesystem:   ptr.To(true),
		RunAsNonRoot:             ptr.To(true),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
	labels := map[string]string{
		kubeexec.LabelManagedBy: kubeexec.ManagedByValue,
		kubeexec.LabelCompany:   kubeexec.LabelValue(c.Slug()),
		kubeexec.LabelCompanyID: kubeexec.LabelValue(c.Spec.ID),
		kubeexec.LabelRole:      kubeexec.RoleAgent,
		LabelLease:              l.ID,
	}
	if l.AdapterType != "" {
		labels[kubeexec.LabelAdapter] = kubeexec.LabelValue(l.AdapterType)
	}
	if l.RunID != "" {
		labels[kubeexec.LabelRunID] = kubeexec.LabelValue(l.RunID)
	}
	if l.AgentID != "" {
		labels[kubeexec.LabelAgentID] = kubeexec.LabelValue(l.AgentID)
	}
	annotations := map[string]string{
		AnnotationExpiresAt:                       l.ExpiresAt.UTC().Format(time.RFC3339),
		"kubectl.kubernetes.io/default-container": ContainerName,
	}
	if l.EnvironmentID != "" {
		annotations[AnnotationEnvironment] = l.EnvironmentID
	}
	pod := &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: l.ID, Namespace: l.Namespace, Labels: labels, Annotations: annotations},
		Spec: corev1.PodSpec{
			ServiceAccountName:            "paperclip-tenant-sa",
			AutomountServiceAccountToken:  ptr.To(false),
			EnableServiceLinks:            ptr.To(false),
			RestartPolicy:                 corev1.RestartPolicyNever,
			ActiveDeadlineSeconds:         ptr.To(deadline),
			TerminationGracePeriodSeconds: ptr.To(int64(5)),
			ImagePullSecrets:              pullSecrets,
			SecurityContext: &corev1.PodSecurityContext{
				RunAsNonRoot:        ptr.To(true),
				RunAsUser:           ptr.To(int64(uid)),
				RunAsGroup:          ptr.To(int64(uid)),
				FSGroup:             ptr.To(int64(uid)),
				FSGroupChangePolicy: ptr.To(corev1.FSGroupChangeOnRootMismatch),
				SeccompProfile:      &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
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
				Resources:       res,
				SecurityContext: secure,
				VolumeMounts: []corev1.VolumeMount{
					{Name: "workspace", MountPath: PodWorkspace},
					{Name: "home", MountPath: PodHome},
					{Name: "tmp", MountPath: "/tmp"},
					{Name: "run", MountPath: PodRunDir},
				},
				TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
				ImagePullPolicy:          corev1.PullIfNotPresent,
			}},
			Volumes: []corev1.Volume{emptyDir("workspace"), emptyDir("home"), emptyDir("tmp"), emptyDir("run")},
		},
	}
	// Where the pod runs: as the agent's Jobs (its node selector and
	// tolerations, the company's runtime class), or the company's defaults.
	podsched.For(c, agent).Apply(&pod.Spec)
	if l.Server == "" {
		// The image does not hold pcsync: an init container of pcsync's
		// image copies it in (one kubelet cycle more before the lease runs).
		spec := &pod.Spec
		spec.InitContainers = []corev1.Container{{
			Name:            "pcsync-bin",
			Image:           l.HelperImage,
			Command:         []string{"/usr/local/bin/pcsync", "sandbox-server", "install", DefaultServerPath},
			Resources:       res,
			SecurityContext: secure,
			VolumeMounts:    []corev1.VolumeMount{{Name: "pcsync-bin", MountPath: PodBinDir}},
			ImagePullPolicy: corev1.PullIfNotPresent,
		}}
		spec.Volumes = append(spec.Volumes, emptyDir("pcsync-bin"))
		main := &spec.Containers[0]
		main.VolumeMounts = append(main.VolumeMounts, corev1.VolumeMount{Name: "pcsync-bin", MountPath: PodBinDir, ReadOnly: true})
	}
	return pod, nil
}
