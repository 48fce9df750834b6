package apply

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Action is what happened (or, in a dry run, would happen) to one object.
type Action string

// The actions, in the order the summary lists them.
const (
	// ActionCreated: the object did not exist and was created.
	ActionCreated Action = "created"
	// ActionConfigured: the object existed and was changed.
	ActionConfigured Action = "configured"
	// ActionUnchanged: the object was already as desired; no request was needed or
	// the server made no change.
	ActionUnchanged Action = "unchanged"
	// ActionRecreated: an immutable field differed and, with Force, the object was
	// deleted and created again.
	ActionRecreated Action = "recreated"
	// ActionPruned: the object was a member of the set, is no longer rendered, and was
	// deleted.
	ActionPruned Action = "pruned"
	// ActionRetained: a Namespace that prune would delete but that still holds objects
	// that are not members of the set (agent Jobs, Secrets created by hand, …); it is
	// kept, and a later prune deletes it once they are gone. See ObjectResult.Note.
	ActionRetained Action = "retained"
	// ActionReleased: the object was adopted (AnnotationAdopt), is no longer
	// rendered, and was let go instead of deleted: the fields only the set's
	// field manager owned (its labels, the set's membership) were removed, the
	// object and what others put on it stay.
	ActionReleased Action = "released"
	// ActionFailed: the object could not be applied (or pruned); see its error.
	ActionFailed Action = "failed"
)

// Actions returns every Action in summary order.
func Actions() []Action {
	return []Action{ActionCreated, ActionConfigured, ActionUnchanged, ActionRecreated, ActionPruned,
		ActionRetained, ActionReleased, ActionFailed}
}

// ObjectRef names one object. Version is informative (the version it was applied
// with); two refs name the same object when Group, Kind, Namespace and Name match.
type ObjectRef struct {
	// Group is the API group ("" for the core group).
	Group string `json:"group,omitempty"`
	// Version is the API version the object was read or applied with.
	Version string `json:"version"`
	// Kind is the object's kind, e.g. "Role".
	Kind string `json:"kind"`
	// Namespace is empty for cluster-scoped objects.
	Namespace string `json:"namespace,omitempty"`
	// Name is the object's name.
	Name string `json:"name"`
}

// RefOf returns the ref of u.
func RefOf(u *unstructured.Unstructured) ObjectRef {
	gvk := u.GroupVersionKind()
	return ObjectRef{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind, Namespace: u.GetNamespace(), Name: u.GetName()}
}

// GroupKind returns the ref's group and kind.
func (r ObjectRef) GroupKind() schema.GroupKind {
	return schema.GroupKind{Group: r.Group, Kind: r.Kind}
}

// String names the object in errors and logs: Kind/namespace/name, or Kind/name for
// cluster-scoped objects, e.g. "Role/paperclip-acme/paperclip-tenant-role".
func (r ObjectRef) String() string {
	if r.Namespace == "" {
		return r.Kind + "/" + r.Name
	}
	return r.Kind + "/" + r.Namespace + "/" + r.Name
}

// KubectlName is the name kubectl prints for the object: the lower-case kind, the
// group if any, and the name, e.g. "role.rbac.authorization.k8s.io/paperclip-tenant-role"
// or "namespace/paperclip-acme".
func (r ObjectRef) KubectlName() string {
	k := strings.ToLower(r.Kind)
	if r.Group != "" {
		k += "." + r.Group
	}
	return k + "/" + r.Name
}

// key drops the version so that refs compare by identity.
func (r ObjectRef) key() objKey {
	return objKey{group: r.Group, kind: r.Kind, namespace: r.Namespace, name: r.Name}
}

type objKey struct{ group, kind, namespace, name string }

// Change is what happened to one object in an Apply, or what would happen to it
// (Apply with DryRun, Diff).
type Change struct {
	// Ref names the object.
	Ref ObjectRef
	// Action is what happened to it.
	Action Action
	// Prune marks a member of the set that is no longer given: its Action is
	// ActionPruned, ActionRetained, ActionReleased or, when deleting (or
	// releasing) it failed, ActionFailed.
	Prune bool
	// Err is set when Action is ActionFailed. Its message starts with the object's
	// ref and the operation ("apply", "prune", "diff") and never contains Secret
	// values.
	Err error
	// Note explains an ActionRetained.
	Note string
	// Diff is the unified diff from the live object to what Apply would make of it
	// (Diff only): empty when Action is unchanged or failed. Secret data is masked.
	Diff string
}

// ChangeSet is the outcome of one Apply or Diff: a Change per object.
type ChangeSet struct {
	// ApplySetID is the applyset.kubernetes.io/id of the inventory parent.
	ApplySetID string
	// Parent names the inventory parent object.
	Parent ObjectRef
	// DryRun is true when nothing was persisted (Apply with DryRun, and Diff).
	DryRun bool
	// Partial is ApplyOptions.Partial: the objects given were part of the set.
	Partial bool
	// Objects has one entry per input object, in the order they were given (objects
	// an early error kept Apply from reaching are left out), followed by the
	// members pruned (or, in a Diff, that prune would delete) in deletion order.
	Objects []Change
	// PruneHeld is the prune the guard stopped (Apply with ApplyOptions.HoldPrune)
	// or would stop (Diff with DiffOptions.Prune), nil when none was: nothing of it
	// was deleted.
	PruneHeld *PruneHold
	// MutatingRequests is the number of mutating HTTP requests (POST, PUT, PATCH,
	// DELETE, including server-side dry runs) the Manager sent during the call.
	MutatingRequests int64
	// ReadRequests is the number of other requests (GET, LIST, discovery).
	ReadRequests int64
	// Duration is the wall time of the call; Stages splits it.
	Duration time.Duration
	Stages   Stages
}

// Stages are the wall times of an Apply's steps.
type Stages struct {
	// Read: the parent, the LISTs of the live members, the ownership checks.
	Read time.Duration
	// Plan: the prune's plan (the LISTs of the kinds only the parent names)
	// and its guard.
	Plan time.Duration
	// Apply: the parent's widening and the objects sent.
	Apply time.Duration
	// Prune: the deletions and the parent's narrowing.
	Prune time.Duration
}

// Count returns how many objects ended with action a.
func (c *ChangeSet) Count(a Action) int {
	n := 0
	for _, o := range c.Objects {
		if o.Action == a {
			n++
		}
	}
	return n
}

// Changed reports whether any object was (or would be) created, changed, recreated or
// pruned.
func (c *ChangeSet) Changed() bool {
	for _, o := range c.Objects {
		switch o.Action {
		case ActionCreated, ActionConfigured, ActionPruned, ActionRecreated, ActionReleased:
			return true
		}
	}
	return false
}

// Err joins the errors of the failed objects; nil when none failed.
func (c *ChangeSet) Err() error {
	var errs []error
	for _, o := range c.Objects {
		if o.Err != nil {
			errs = append(errs, o.Err)
		}
	}
	return errors.Join(errs...)
}

// OnlyPrunesFailed reports whether at least one object failed and every failed
// object is one being pruned: the objects given were all applied.
func (c *ChangeSet) OnlyPrunesFailed() bool {
	failed := false
	for _, o := range c.Objects {
		if o.Action == ActionFailed {
			if !o.Prune {
				return false
			}
			failed = true
		}
	}
	return failed
}

// objectError prefixes err with the object and the operation, as in
// "Role/paperclip-acme/paperclip-tenant-role apply failed: …".
func objectError(ref ObjectRef, op string, err error) error {
	return fmt.Errorf("%s %s failed: %w", ref, op, err)
}
