package apply

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/pcsync/pcsync/pkg/fastpath"
)

// DefaultFieldManager is the server-side apply field manager of pcsync.
const DefaultFieldManager = "pcsync"

// ManagerOptions configure a Manager: who it is and which inventory it keeps.
type ManagerOptions struct {
	// FieldManager is the server-side apply field manager for applied objects.
	// Default "pcsync".
	FieldManager string
	// ApplySet is the inventory parent, a Secret. Default pcsync in namespace
	// paperclip.
	ApplySet ParentRef
	// ToolingName is the tool name written to and required in the parent's
	// applyset.kubernetes.io/tooling annotation. Default "pcsync". A parent that names
	// another tool is refused, as the ApplySet specification asks. Setting "kubectl"
	// makes the set one that kubectl (KUBECTL_APPLYSET=true) will also change and
	// prune.
	ToolingName string
	// ToolVersion is the version written after ToolingName, e.g. "v0.3.0".
	// Default "v0.0.0-dev".
	ToolVersion string
	// Workers bounds the requests one verb sends in parallel. Default 16.
	Workers int
	// MissingKindHints says, per group, what to do when the cluster does not serve a
	// kind of that group; it is appended to the error. Default:
	// DefaultMissingKindHints.
	MissingKindHints map[string]string
	// OwnerLabel is the label whose value, on an object given to Apply, an
	// existing object that is not a member of the set must carry in its
	// AnnotationAdopt to be taken (pcsync sets its company label). Objects
	// without it are owned by their Namespace's name. Default "".
	OwnerLabel string
	// Logger receives debug and progress records; nil discards them. Object contents
	// are never logged.
	Logger *slog.Logger
	// Reference sends every object that exists to the server (an apply, or for Diff
	// a dry run) instead of deciding from the LIST that it is already as desired
	// (see package fastpath and fastpath_compare.go). The actions and diffs are the
	// same; the requests are not.
	Reference fastpath.Reference
}

// ParentRef names the Secret that is the ApplySet parent.
type ParentRef struct {
	// Name of the Secret. Default "pcsync".
	Name string
	// Namespace of the Secret; created if missing. Default
	// DefaultApplySetNamespace.
	Namespace string
}

// DefaultApplySetNamespace is the namespace of the ApplySet parent unless
// told: the one deploy/base installs pcsync into, so that the CLI and the
// daemon deploy/base runs keep one inventory.
const DefaultApplySetNamespace = "pcsync-system"

// DefaultMissingKindHints are the built-in hints for kinds a plain cluster lacks.
func DefaultMissingKindHints() map[string]string {
	return map[string]string{
		"cilium.io": "install Cilium (it serves cilium.io/v2 CiliumNetworkPolicy), " +
			"or set Settings spec.egress.mode (or the company's egress.mode) to \"proxy\", the default, " +
			"whose egress proxy enforces host names on any network plugin",
	}
}

// DefaultManagerOptions returns the defaults described on ManagerOptions.
func DefaultManagerOptions() ManagerOptions {
	return ManagerOptions{
		FieldManager:     DefaultFieldManager,
		ApplySet:         ParentRef{Name: "pcsync", Namespace: DefaultApplySetNamespace},
		ToolingName:      "pcsync",
		ToolVersion:      "v0.0.0-dev",
		Workers:          16,
		MissingKindHints: DefaultMissingKindHints(),
	}
}

func (o *ManagerOptions) complete() {
	d := DefaultManagerOptions()
	o.FieldManager = cmp.Or(o.FieldManager, d.FieldManager)
	o.ApplySet.Name = cmp.Or(o.ApplySet.Name, d.ApplySet.Name)
	o.ApplySet.Namespace = cmp.Or(o.ApplySet.Namespace, d.ApplySet.Namespace)
	o.ToolingName = cmp.Or(o.ToolingName, d.ToolingName)
	o.ToolVersion = cmp.Or(o.ToolVersion, d.ToolVersion)
	o.Workers = cmp.Or(max(o.Workers, 0), d.Workers)
	if o.MissingKindHints == nil {
		o.MissingKindHints = d.MissingKindHints
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

// ApplyOptions configure one Apply.
type ApplyOptions struct {
	// ForceConflicts takes back fields another field manager changed (kubectl edit,
	// kubectl patch, another controller): the objects given own the fields they
	// declare, as Flux's kustomize-controller does. DefaultApplyOptions sets it;
	// without it such an object fails with an error naming the other managers and
	// the fields.
	ForceConflicts bool
	// Force deletes and recreates an object whose change touches an immutable field.
	// Without it such an object fails with an error that says so.
	Force bool
	// DryRun persists nothing: changes are sent as server-side dry runs, the parent is
	// not written and prune only reports what it would delete.
	DryRun bool
	// Prune deletes members of the set that are not among the objects given, within
	// the prune guard (see PruneHold): an empty render, every tenant, or more tenants
	// than PruneMax (at least PruneFloor) is held until approved.
	Prune bool
	// PruneMax is the most tenants one prune may remove: a count (e.g. 10) or a share
	// of the set's live tenants (e.g. "25%", rounded down). DefaultApplyOptions sets
	// 25%.
	PruneMax intstr.IntOrString
	// PruneFloor is how many tenants one prune may always remove, whatever PruneMax
	// gives for the fleet (never every tenant). DefaultApplyOptions sets
	// DefaultPruneFloor (3).
	PruneFloor int
	// AllowMassPrune lifts the prune guard.
	AllowMassPrune bool
	// PruneApproval approves one held prune: the PruneHold's Token. The parent's
	// AnnotationApprovePrune does the same.
	PruneApproval string
	// HoldPrune, when the guard stops a prune, applies the objects anyway and holds
	// only the deletions (ChangeSet.PruneHeld) instead of refusing the whole call
	// before anything changes (a *PruneRefusedError). The daemon sets it.
	HoldPrune bool
	// Handover moves tenants between the ApplySets of one fleet (its shards).
	Handover Handover
	// Partial says the objects given are only part of the set (those that
	// changed): the parent's kinds and namespaces are widened, never
	// narrowed, the live members are read only where the objects are, and
	// Prune is refused. It needs the parent: without it Apply refuses
	// (ErrPartialNoParent) before anything changes.
	Partial bool
	// Wait waits until every applied object is current (kstatus) and every pruned
	// object is gone.
	Wait bool
	// Timeout bounds waiting: for CRDs to be established, for an object deleted by
	// Force to disappear, and for Wait. Default 2m.
	Timeout time.Duration
}

// Handover is how tenants move between ApplySets that split one fleet
// (pcsync's shards): the set that gives a tenant up keeps its members out of
// prune, and the set that takes it takes them over.
type Handover struct {
	// Keep are namespaces of tenants another set serves now: prune neither
	// deletes nor counts the members in them (the Namespace of that name
	// included); they stay in the parent until the other set takes them.
	Keep []string
	// From are the IDs (ParentID) of the sets whose members Apply takes,
	// when it is given them, as if they were its own: their part-of label
	// becomes this set's. Other sets' members stay refused (ErrNotOwned).
	From []string
}

// DefaultApplyOptions returns the defaults described on ApplyOptions.
func DefaultApplyOptions() ApplyOptions {
	return ApplyOptions{ForceConflicts: true, PruneMax: intstr.FromString("25%"), PruneFloor: DefaultPruneFloor,
		Timeout: 2 * time.Minute}
}

func (o *ApplyOptions) complete() error {
	if _, err := intstr.GetScaledValueFromIntOrPercent(&o.PruneMax, 100, false); err != nil {
		return fmt.Errorf("invalid prune limit %q: %w", o.PruneMax.String(), err)
	}
	if o.PruneFloor < 0 {
		return fmt.Errorf("invalid prune floor %d: want 0 or more", o.PruneFloor)
	}
	if o.Partial && o.Prune {
		return errors.New("a partial apply cannot prune: what is not given is not known to be gone")
	}
	o.Timeout = cmp.Or(max(o.Timeout, 0), DefaultApplyOptions().Timeout)
	return nil
}

// ParsePruneMax parses a --prune-max value: a count ("10") or a percentage ("25%").
func ParsePruneMax(s string) (intstr.IntOrString, error) {
	v := intstr.Parse(s)
	if v.Type == intstr.String && (len(s) < 2 || s[len(s)-1] != '%') {
		return v, fmt.Errorf("invalid prune limit %q: want a count such as 10 or a percentage such as 25%%", s)
	}
	n, err := intstr.GetScaledValueFromIntOrPercent(&v, 100, false)
	if err != nil || n < 0 {
		return v, fmt.Errorf("invalid prune limit %q: want a count such as 10 or a percentage such as 25%%", s)
	}
	return v, nil
}

// DiffOptions configure one Diff.
type DiffOptions struct {
	// ForceConflicts dry-runs with conflicts forced, so that the diff shows what
	// Apply with ForceConflicts changes, fields taken back from other managers
	// included. DefaultDiffOptions sets it, as DefaultApplyOptions does; without
	// it an object with conflicts fails.
	ForceConflicts bool
	// Prune shows the members that apply --prune would delete, as deletions, and
	// runs the prune guard on them with PruneMax, PruneFloor and AllowMassPrune
	// (ChangeSet.PruneHeld).
	Prune bool
	// PruneMax, PruneFloor and AllowMassPrune are those of ApplyOptions.
	// DefaultDiffOptions sets the same defaults.
	PruneMax       intstr.IntOrString
	PruneFloor     int
	AllowMassPrune bool
	// Context is the number of unchanged lines around each change. Default 3.
	Context int
}

// DefaultDiffOptions returns the defaults described on DiffOptions.
func DefaultDiffOptions() DiffOptions {
	a := DefaultApplyOptions()
	return DiffOptions{ForceConflicts: a.ForceConflicts, PruneMax: a.PruneMax, PruneFloor: a.PruneFloor, Context: 3}
}

// complete fills a zero or negative Context with DefaultDiffOptions'. The
// prune limits are checked by the prune guard, as Apply's are.
func (o *DiffOptions) complete() {
	o.Context = cmp.Or(max(o.Context, 0), DefaultDiffOptions().Context)
}

// WaitOptions configure one Wait (Apply with Wait uses ApplyOptions.Timeout).
type WaitOptions struct {
	// Interval is the time between two rounds of LISTs. Default 500ms.
	Interval time.Duration
	// Timeout bounds the wait. Default 2m.
	Timeout time.Duration
}

// DefaultWaitOptions returns the defaults described on WaitOptions.
func DefaultWaitOptions() WaitOptions {
	return WaitOptions{Interval: 500 * time.Millisecond, Timeout: 2 * time.Minute}
}

func (o *WaitOptions) complete() {
	d := DefaultWaitOptions()
	o.Interval = cmp.Or(max(o.Interval, 0), d.Interval)
	o.Timeout = cmp.Or(max(o.Timeout, 0), d.Timeout)
}

// crdGroupKind is the kind of CustomResourceDefinitions.
var crdGroupKind = schema.GroupKind{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}

// namespaceGroupKind is the kind of Namespaces.
var namespaceGroupKind = schema.GroupKind{Kind: "Namespace"}
