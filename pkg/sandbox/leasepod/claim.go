package leasepod

import (
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pcsync/pcsync/internal/lib/agentpod"
	"github.com/pcsync/pcsync/pkg/config"
)

// Labels and annotations of a kept lease's claim, besides agentpod's
// managed-by and company labels and LabelLease.
const (
	// LabelOwner is the deployment of pcsync whose daemon keeps the claim
	// (the warm pools' owner): another one leaves it alone.
	LabelOwner = "pcsync.io/sandbox-owner"
	// AnnotationRecord is the lease's Record as JSON: a daemon that lost
	// its journal rebuilds a suspended lease from it.
	AnnotationRecord = "pcsync.io/sandbox-lease-record"
	// keepVolume is the claim's volume in the lease's pods.
	keepVolume = "keep"
)

// BuildClaim returns the claim that keeps kept lease l's workspace and
// HOME (ReadWriteOnce, l.Keep's size and StorageClass), named as the lease
// and its pods, labelled with the lease, its company and owner, and
// annotated with its record and expiry.
func BuildClaim(l *Record, c *config.Company, owner string) (*corev1.PersistentVolumeClaim, error) {
	if l.Keep == nil {
		return nil, fmt.Errorf("PersistentVolumeClaim/%s/%s: the lease keeps no storage", l.Namespace, l.ID)
	}
	size, err := resource.ParseQuantity(l.Keep.Size)
	if err != nil {
		return nil, fmt.Errorf("PersistentVolumeClaim/%s/%s: size %q: %w", l.Namespace, l.ID, l.Keep.Size, err)
	}
	rec := *l
	rec.PodUID, rec.Suspended = "", false
	data, err := json.Marshal(rec)
	if err != nil {
		return nil, err
	}
	pvc := &corev1.PersistentVolumeClaim{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"},
		ObjectMeta: metav1.ObjectMeta{Name: l.ID, Namespace: l.Namespace,
			Labels: map[string]string{
				agentpod.LabelManagedBy: agentpod.ManagedByValue,
				agentpod.LabelCompany:   agentpod.LabelValue(c.Slug()),
				LabelLease:              l.ID,
				LabelOwner:              agentpod.LabelValue(owner),
			},
			Annotations: map[string]string{AnnotationRecord: string(data), AnnotationExpiresAt: Annotations(l)[AnnotationExpiresAt]},
		},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: size}},
		},
	}
	if l.Keep.StorageClassName != "" {
		pvc.Spec.StorageClassName = &l.Keep.StorageClassName
	}
	return pvc, nil
}

// ClaimRecord is the record a kept lease's claim carries (AnnotationRecord).
func ClaimRecord(pvc *corev1.PersistentVolumeClaim) (Record, error) {
	var r Record
	if err := json.Unmarshal([]byte(pvc.Annotations[AnnotationRecord]), &r); err != nil {
		return Record{}, fmt.Errorf("PersistentVolumeClaim/%s/%s: annotation %s: %w", pvc.Namespace, pvc.Name, AnnotationRecord, err)
	}
	if r.ID != pvc.Name || r.Namespace != pvc.Namespace || r.Keep == nil {
		return Record{}, fmt.Errorf("PersistentVolumeClaim/%s/%s: annotation %s is another lease's", pvc.Namespace, pvc.Name, AnnotationRecord)
	}
	return r, nil
}

// keepOnClaim puts pod's workspace and HOME on its lease's claim (the
// directories workspace and home of it) in place of their emptyDirs.
func keepOnClaim(pod *corev1.Pod, claim string) {
	vols := pod.Spec.Volumes[:0]
	for _, v := range pod.Spec.Volumes {
		if v.Name != "workspace" && v.Name != "home" {
			vols = append(vols, v)
		}
	}
	pod.Spec.Volumes = append(vols, corev1.Volume{Name: keepVolume, VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}})
	for ci := range pod.Spec.Containers {
		ctr := &pod.Spec.Containers[ci]
		for i, vm := range ctr.VolumeMounts {
			if vm.Name == "workspace" || vm.Name == "home" {
				ctr.VolumeMounts[i] = corev1.VolumeMount{Name: keepVolume, MountPath: vm.MountPath, SubPath: vm.Name}
			}
		}
	}
}
