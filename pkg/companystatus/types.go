package companystatus

import (
	_ "embed"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The CompanyStatus kind and its resource.
const (
	Group    = "pcsync.io"
	Version  = "v1alpha1"
	Kind     = "CompanyStatus"
	Resource = "companystatuses"
	// CRDName is the name of its CustomResourceDefinition (CRD).
	CRDName = Resource + "." + Group
)

// GVR is the CompanyStatus resource.
var GVR = schema.GroupVersionResource{Group: Group, Version: Version, Resource: Resource}

// APIVersion is the CompanyStatus apiVersion.
const APIVersion = Group + "/" + Version

// CRD is the CompanyStatus CustomResourceDefinition, as YAML: deploy/base
// ships the same bytes (a test keeps them so).
//
//go:embed crd.yaml
var CRD []byte

// AnnotationReconcileRequestedAt, set on a CompanyStatus to any new value
// (pcsync reconcile sets the time, RFC 3339), asks the daemon for a full
// reconcile at once; status.lastHandledReconcileAt takes the value once a
// reconcile that began after the request ended.
const AnnotationReconcileRequestedAt = "pcsync.io/reconcile-requested-at"

// LabelOwner names, on a CompanyStatus, the ApplySet ID of the daemon that
// writes it: only that daemon deletes it, once its company left the config.
const LabelOwner = "pcsync.io/status-owner"

// FieldManager is the field manager of the daemon's writes of
// CompanyStatus objects.
const FieldManager = "pcsync-status"

// The condition types, as kstatus reads them: Ready is True once the
// company's revision is applied; Reconciling (present only when True) says
// a failure is retried; Stalled (present only when True) says nothing
// changes until the config does.
const (
	ConditionReady       = "Ready"
	ConditionReconciling = "Reconciling"
	ConditionStalled     = "Stalled"
)

// The reasons of the Ready condition, which are also the reasons of the
// Events the daemon records on a CompanyStatus when they change.
const (
	// ReasonSucceeded: the revision is applied (Ready True).
	ReasonSucceeded = "ReconciliationSucceeded"
	// ReasonFailed: the company's objects, or the whole apply, failed.
	ReasonFailed = "ReconciliationFailed"
	// ReasonPaperclipFailed: the company's Paperclip side failed.
	ReasonPaperclipFailed = "PaperclipFailed"
	// ReasonConfigInvalid: the config does not load or render; the last
	// good revision stays applied.
	ReasonConfigInvalid = "ConfigInvalid"
	// ReasonSuspended: spec.suspend: nothing applied or pruned, no new run
	// or lease.
	ReasonSuspended = "Suspended"
	// ReasonPruneHeld: the company left the config and the prune guard
	// holds the deletion of its tenant.
	ReasonPruneHeld = "PruneHeld"
	// ReasonRetrying is Reconciling's reason while a failure is retried.
	ReasonRetrying = "ProgressingWithRetry"
)

// CompanyStatus is one company's status object.
type CompanyStatus struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              Spec   `json:"spec,omitempty"`
	Status            Status `json:"status,omitempty"`
}

// Spec is the company, as the config declares it.
type Spec struct {
	// Namespace is the company's tenant namespace.
	Namespace string `json:"namespace,omitempty"`
	// ID is the company's Paperclip id (its spec.id).
	ID string `json:"id,omitempty"`
}

// Status is what the daemon last did with the company.
type Status struct {
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions are Ready, and Reconciling or Stalled while True.
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// Revision is the config revision last applied to the tenant: a Git
	// commit, or sha256:<digest> of the render.
	Revision string `json:"revision,omitempty"`
	// LastAttemptedRevision is the revision last tried.
	LastAttemptedRevision string `json:"lastAttemptedRevision,omitempty"`
	// LastAppliedAt is when Revision was applied.
	LastAppliedAt *metav1.Time `json:"lastAppliedAt,omitempty"`
	// Suspended: the company has spec.suspend.
	Suspended bool `json:"suspended,omitempty"`
	// LastHandledReconcileAt is the last AnnotationReconcileRequestedAt a
	// reconcile answered.
	LastHandledReconcileAt string `json:"lastHandledReconcileAt,omitempty"`
}

// Condition returns the condition of type t, nil when there is none.
func (s *Status) Condition(t string) *metav1.Condition {
	for i := range s.Conditions {
		if s.Conditions[i].Type == t {
			return &s.Conditions[i]
		}
	}
	return nil
}

// Requested is the object's pending reconcile request: its
// AnnotationReconcileRequestedAt when no reconcile answered it yet, "" when
// none is pending.
func (cs *CompanyStatus) Requested() string {
	v := cs.Annotations[AnnotationReconcileRequestedAt]
	if v == cs.Status.LastHandledReconcileAt {
		return ""
	}
	return v
}

// FromUnstructured decodes a CompanyStatus.
func FromUnstructured(u *unstructured.Unstructured) (*CompanyStatus, error) {
	var cs CompanyStatus
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &cs); err != nil {
		return nil, fmt.Errorf("%s %s/%s: %w", Kind, u.GetNamespace(), u.GetName(), err)
	}
	return &cs, nil
}
