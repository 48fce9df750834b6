package kubeexec

import (
	"cmp"
	"fmt"
	"maps"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/pcsync/pcsync/internal/lib/agentpod"
	"github.com/pcsync/pcsync/pkg/config"
	"github.com/pcsync/pcsync/pkg/egressproxy/agentenv"
	"github.com/pcsync/pcsync/pkg/images"
	"github.com/pcsync/pcsync/pkg/introspect"
	"github.com/pcsync/pcsync/pkg/podsched"
	"github.com/pcsync/pcsync/pkg/podsec"
)

// Volume names of the agent pod.
const (
	volWorkspace = "workspace"
	volHome      = "home"
	volCache     = "cache"
	volTmp       = "tmp"
	volInput     = "run-input"
	volSessions  = "sessions"
)

// Labels returns the labels of a run's Job and Secret.
func (in Input) Labels() map[string]string {
	return map[string]string{
		agentpod.LabelManagedBy: agentpod.ManagedByValue,
		agentpod.LabelRunID:     agentpod.LabelValue(in.RunID),
		agentpod.LabelAgentID:   agentpod.LabelValue(cmp.Or(in.AgentID, in.Agent.Name)),
		agentpod.LabelAgent:     agentpod.LabelValue(in.Agent.Name),
		agentpod.LabelCompanyID: agentpod.LabelValue(in.Company.Spec.ID),
		agentpod.LabelCompany:   agentpod.LabelValue(in.Company.Slug()),
		agentpod.LabelAdapter:   agentpod.LabelValue(string(in.Agent.Adapter)),
		agentpod.LabelRole:      agentpod.RoleAgent,
	}
}

// BuildJob returns the run's Job: one pod, never retried (backoffLimit 0),
// stopped at the run's deadline (activeDeadlineSeconds), removed by the TTL
// controller after the company's ttlSecondsAfterFinished at the latest, and
// hardened to pass Pod Security "restricted": non-root uid/gid 1000, no
// service-account token, seccomp RuntimeDefault, all capabilities dropped, no
// privilege escalation, a read-only root filesystem with emptyDirs for the
// working directory, HOME, the cache and /tmp.
//
// The prompt and the secret env live in the per-run Secret of the same name
// (BuildSecret), which the pod needs (a non-optional volume and secretKeyRefs):
// the kubelet waits for it, so the Job may be created first.
func BuildJob(in Input, o BuildOptions) (*batchv1.Job, error) {
	o.complete()
	ns, name := in.Namespace(), in.JobName()
	errf := func(format string, args ...any) error {
		return fmt.Errorf("Job/%s/%s: "+format, append([]any{ns, name}, args...)...)
	}
	if len(in.Command.Args) == 0 {
		return nil, errf("the adapter gave an empty command line")
	}
	res, err := podsched.Resources(in.Model.AgentResources(in.Agent))
	if err != nil {
		return nil, errf("agent %s resources: %w", in.Agent.Name, err)
	}
	jobs := in.Model.Jobs(in.Company)
	hard, err := podsec.For(o.ServiceAccountName, o.UID, jobs.EmptyDirSizeLimit)
	if err != nil {
		return nil, errf("%w", err)
	}
	spec := batchv1.JobSpec{
		BackoffLimit:            ptr.To(int32(0)),
		TTLSecondsAfterFinished: int32Ptr(jobs.TTLSecondsAfterFinished),
		Template:                in.podTemplate(o, name, res, hard),
	}
	if in.Timeout > 0 {
		spec.ActiveDeadlineSeconds = ptr.To(int64((in.Timeout + time.Second - 1) / time.Second))
	}
	return &batchv1.Job{
		TypeMeta: metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Namespace:   ns,
			Labels:      in.Labels(),
			Annotations: map[string]string{AnnotationRequest: in.RequestFile},
		},
		Spec: spec,
	}, nil
}

// podTemplate is the Job's pod: the agent's labels under the run's, one
// container, hardened, and where it runs: the agent's node selector and
// tolerations, the company's runtime class (both shared with the sandbox's
// lease pods), and the DNS config pcsync's own pod passes on.
func (in Input) podTemplate(o BuildOptions, name string, res corev1.ResourceRequirements, hard podsec.Hardening) corev1.PodTemplateSpec {
	podLabels := maps.Clone(in.Agent.Labels)
	if podLabels == nil {
		podLabels = map[string]string{}
	}
	maps.Copy(podLabels, in.Labels())
	image, command, sharePID := in.launch(o)
	env, envFrom := in.containerEnv(o, name)
	mounts, volumes := in.volumes(o, name, hard)
	annotations := map[string]string{"kubectl.kubernetes.io/default-container": o.ContainerName}
	if in.Credentials != nil {
		// The proxy takes the run's token while this pod lives
		// (package tokensync); the token itself is in the Secret only.
		annotations[agentpod.AnnotationTokenHash] = agentpod.TokenHash(in.Credentials.Token)
	}
	t := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{
			Labels:      podLabels,
			Annotations: annotations,
		},
		Spec: corev1.PodSpec{
			ShareProcessNamespace:         sharePID,
			TerminationGracePeriodSeconds: ptr.To(int64(in.Agent.GraceSec)),
			ImagePullSecrets:              podsec.PullSecrets(in.pullSecrets(o)),
			Containers: []corev1.Container{{
				Name:                     o.ContainerName,
				Image:                    image,
				Command:                  command,
				Args:                     escapeAll(in.Command.Args),
				WorkingDir:               o.WorkDir,
				Env:                      env,
				EnvFrom:                  envFrom,
				Resources:                res,
				VolumeMounts:             mounts,
				TerminationMessagePolicy: corev1.TerminationMessageReadFile,
			}},
			Volumes: volumes,
		},
	}
	hard.Apply(&t.Spec)
	podsched.For(in.Company, in.Agent).Apply(&t.Spec)
	if in.Model.Settings.Spec.Inherit.DNSConfig && o.Inherited.DNSConfig != nil {
		t.Spec.DNSConfig = o.Inherited.DNSConfig.DeepCopy()
		t.Spec.DNSPolicy = o.Inherited.DNSPolicy
	}
	if in.Proxy != nil {
		// Egress mode proxy: the proxy resolves every name the agent
		// reaches through it; the pod has no DNS channel of its own.
		agentenv.NoClusterDNS(&t.Spec, in.HostAliases)
	}
	return t
}

// launch is the agent container's image and command, and whether the pod
// shares its process namespace. PID 1 forwards the kubelet's SIGTERM to
// the CLI's process group and reaps orphans: pcsync init in pcsync's own
// images (which also records the CLI's start and end to the millisecond);
// in another image, the pod's pause container, by a shared process
// namespace, so that the CLI is not PID 1 (which ignores every signal it
// has no handler for).
func (in Input) launch(o BuildOptions) (image string, command []string, sharePID *bool) {
	image = in.Model.AgentImage(in.Agent)
	command = escapeAll(o.Launcher)
	if in.Model.ImageHasServer(image) {
		init := []string{images.ServerPath, "init"}
		if in.Model.EgressMode(in.Company) == config.EgressProxy {
			// The CLI's first request must not fail: the company's proxy
			// may be scaling up from zero as this pod starts, and a new
			// pod's egress may be allowed a moment after it starts.
			switch {
			case in.WaitProxy:
				init = append(init, "--wait-proxy")
			case o.ProxyGrace > 0:
				init = append(init, "--proxy-grace", o.ProxyGrace.String())
			}
		}
		return image, append(append(init, "--"), command...), nil
	}
	return image, command, ptr.To(true)
}

// containerEnv is the agent container's env, its secret values taken from
// the run's Secret name, and the company's secretRefs as envFrom.
func (in Input) containerEnv(o BuildOptions, name string) ([]corev1.EnvVar, []corev1.EnvFromSource) {
	var env []corev1.EnvVar
	for _, e := range in.env(o) {
		v := corev1.EnvVar{Name: e.Name, Value: e.Value}
		if e.Secret {
			v = corev1.EnvVar{Name: e.Name, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: name},
				Key:                  SecretEnvPrefix + e.Name,
				Optional:             ptr.To(false),
			}}}
		}
		env = append(env, v)
	}
	var envFrom []corev1.EnvFromSource
	for _, s := range in.Company.Spec.SecretRefs {
		envFrom = append(envFrom, corev1.EnvFromSource{SecretRef: &corev1.SecretEnvSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: s.Name},
			Optional:             ptr.To(s.Optional),
		}})
	}
	return env, envFrom
}

// volumes are the agent container's mounts and the pod's volumes: capped
// emptyDirs for the working directory, the cache and /tmp, the prompt
// from the run's Secret name, and HOME: the company's sessions volume, or
// another emptyDir.
func (in Input) volumes(o BuildOptions, name string, hard podsec.Hardening) ([]corev1.VolumeMount, []corev1.Volume) {
	mounts := []corev1.VolumeMount{
		{Name: volWorkspace, MountPath: o.WorkDir},
		{Name: volCache, MountPath: o.CacheDir},
		{Name: volTmp, MountPath: "/tmp"},
		{Name: volInput, MountPath: o.InputDir, ReadOnly: true},
	}
	volumes := []corev1.Volume{
		hard.EmptyDir(volWorkspace),
		hard.EmptyDir(volCache),
		hard.EmptyDir(volTmp),
		{Name: volInput, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName:  name,
			Items:       []corev1.KeyToPath{{Key: SecretKeyPrompt, Path: SecretKeyPrompt}},
			DefaultMode: ptr.To(int32(0o440)),
			Optional:    ptr.To(false),
		}}},
	}
	if in.Company.Spec.Sessions != nil {
		mounts = append(mounts, corev1.VolumeMount{Name: volSessions, MountPath: o.SessionsMountPath})
		volumes = append(volumes, corev1.Volume{Name: volSessions, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: o.SessionsClaimName},
		}})
		return mounts, volumes
	}
	mounts = append(mounts, corev1.VolumeMount{Name: volHome, MountPath: in.home(o)})
	return mounts, append(volumes, hard.EmptyDir(volHome))
}

// pullSecrets are the pod's image pull Secrets: the config's, and those of
// pcsync's own pod when Settings inherit them.
func (in Input) pullSecrets(o BuildOptions) []string {
	names := in.Model.ImagePullSecrets(in.Company)
	if in.Model.Settings.Spec.Inherit.ImagePullSecrets {
		names = introspect.MergePullSecrets(names, o.Inherited.ImagePullSecrets)
	}
	return names
}

func int32Ptr(v *int) *int32 {
	if v == nil {
		return nil
	}
	return ptr.To(int32(*v))
}

// escapeAll doubles every '$' so that the kubelet's $(VAR) expansion of
// command and args leaves the strings exactly as given.
func escapeAll(in []string) []string {
	out := make([]string, len(in))
	for i, s := range in {
		out[i] = strings.ReplaceAll(s, "$", "$$")
	}
	return out
}
