package podsec

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	"github.com/pcsync/pcsync/pkg/config"
)

// Defaults of an agent pod.
const (
	// DefaultServiceAccount is the tenant's ServiceAccount that pcsync
	// apply creates in each tenant namespace.
	DefaultServiceAccount = "paperclip-tenant-sa"
	// DefaultUID is the user and group an agent pod runs as.
	DefaultUID = 1000
)

// Hardening is the hardened part of an agent pod's spec.
type Hardening struct {
	// ServiceAccountName is the pod's ServiceAccount (its token is never
	// mounted).
	ServiceAccountName string
	// UID is runAsUser, runAsGroup and fsGroup.
	UID int64
	// EmptyDirSizeLimit caps each emptyDir; nil: no cap.
	EmptyDirSizeLimit *resource.Quantity
}

// For returns the hardening of a pod of the ServiceAccount sa that runs as
// uid, its emptyDirs capped at sizeLimit (the company's
// jobs.emptyDirSizeLimit; nil: no cap). It fails when sizeLimit is no
// quantity.
func For(sa string, uid int64, sizeLimit *config.Quantity) (Hardening, error) {
	h := Hardening{ServiceAccountName: sa, UID: uid}
	if sizeLimit != nil {
		q, err := resource.ParseQuantity(string(*sizeLimit))
		if err != nil {
			return Hardening{}, fmt.Errorf("jobs.emptyDirSizeLimit %q: %w", string(*sizeLimit), err)
		}
		h.EmptyDirSizeLimit = &q
	}
	return h, nil
}

// Apply sets spec's hardened fields, and those of each of its containers
// and init containers, replacing what they held: call it once the
// containers are in place.
func (h Hardening) Apply(spec *corev1.PodSpec) {
	spec.ServiceAccountName = h.ServiceAccountName
	spec.AutomountServiceAccountToken = ptr.To(false)
	spec.EnableServiceLinks = ptr.To(false)
	spec.RestartPolicy = corev1.RestartPolicyNever
	spec.SecurityContext = &corev1.PodSecurityContext{
		RunAsNonRoot:        ptr.To(true),
		RunAsUser:           ptr.To(h.UID),
		RunAsGroup:          ptr.To(h.UID),
		FSGroup:             ptr.To(h.UID),
		FSGroupChangePolicy: ptr.To(corev1.FSGroupChangeOnRootMismatch),
		SeccompProfile:      &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
	for _, cs := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
		for i := range cs {
			cs[i].SecurityContext = ContainerSecurityContext()
			cs[i].ImagePullPolicy = corev1.PullIfNotPresent
		}
	}
}

// ContainerSecurityContext is the security context of each container of
// an agent pod.
func ContainerSecurityContext() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr.To(false),
		Privileged:               ptr.To(false),
		ReadOnlyRootFilesystem:   ptr.To(true),
		RunAsNonRoot:             ptr.To(true),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

// EmptyDir is a writable emptyDir volume of the pod, capped at
// EmptyDirSizeLimit.
func (h Hardening) EmptyDir(name string) corev1.Volume {
	var limit *resource.Quantity
	if h.EmptyDirSizeLimit != nil {
		q := h.EmptyDirSizeLimit.DeepCopy()
		limit = &q
	}
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: limit}}}
}

// PullSecrets are the image pull Secrets of the given names, in order;
// nil when there is none.
func PullSecrets(names []string) []corev1.LocalObjectReference {
	var out []corev1.LocalObjectReference
	for _, n := range names {
		out = append(out, corev1.LocalObjectReference{Name: n})
	}
	return out
}

// Of returns the hardened fields of spec (and the security contexts and
// pull policies of its containers, init containers first), so that tests
// can compare the pods of different builders.
func Of(spec *corev1.PodSpec) Fields {
	f := Fields{
		ServiceAccountName:           spec.ServiceAccountName,
		AutomountServiceAccountToken: spec.AutomountServiceAccountToken,
		EnableServiceLinks:           spec.EnableServiceLinks,
		RestartPolicy:                spec.RestartPolicy,
		SecurityContext:              spec.SecurityContext,
	}
	for _, cs := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
		for _, c := range cs {
			f.Containers = append(f.Containers, ContainerFields{SecurityContext: c.SecurityContext, ImagePullPolicy: c.ImagePullPolicy})
		}
	}
	return f
}

// Fields are the fields of a pod spec that Apply sets.
type Fields struct {
	ServiceAccountName           string
	AutomountServiceAccountToken *bool
	EnableServiceLinks           *bool
	RestartPolicy                corev1.RestartPolicy
	SecurityContext              *corev1.PodSecurityContext
	Containers                   []ContainerFields
}

// ContainerFields are the fields of a container that Apply sets.
type ContainerFields struct {
	SecurityContext *corev1.SecurityContext
	ImagePullPolicy corev1.PullPolicy
}
