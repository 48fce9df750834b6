package apply

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/sets"
)

// AnnotationApprovePrune on the ApplySet parent approves one prune the guard
// held: its value must be the PruneHold's Token, so an approval covers exactly
// the deletions it was given for and nothing that comes later. pcsync removes
// the annotation once that prune is done.
const AnnotationApprovePrune = "pcsync.io/approve-prune"

// DefaultPruneFloor is how many tenants one prune may always remove,
// whatever the size of the fleet.
const DefaultPruneFloor = 3

// HoldReason says why the prune guard stopped a prune.
type HoldReason string

// The reasons of a held prune.
const (
	// HoldEmptyRender: nothing was rendered, so every member would go.
	HoldEmptyRender HoldReason = "EmptyRender"
	// HoldWholeFleet: every tenant of the set would go.
	HoldWholeFleet HoldReason = "WholeFleet"
	// HoldOverLimit: more tenants would go than PruneMax (at least
	// PruneFloor) allows.
	HoldOverLimit HoldReason = "OverLimit"
)

// PruneHold is a prune the guard stopped: what it would delete, why it was
// stopped and the token that approves it.
//
// The guard counts tenants, not objects. A tenant is a namespace that holds
// members of the set (a company's namespace); it disappears when nothing
// rendered lives in it any more. Objects pruned inside tenants that stay are
// ordinary edits and never held.
type PruneHold struct {
	// Reason says why the prune was held.
	Reason HoldReason
	// Tenants are the namespaces of the tenants that would disappear, sorted.
	Tenants []string
	// Fleet is the number of tenants in the set now.
	Fleet int
	// Limit is the most tenants one prune may remove: the larger of PruneMax
	// (of Fleet) and PruneFloor, and always fewer than Fleet.
	Limit int
	// Objects is the number of members the prune would delete.
	Objects int
	// Token approves exactly this prune (AnnotationApprovePrune); it is a digest
	// of the objects to delete and their UIDs.
	Token string
	// PruneMax and PruneFloor are the limits in force, as given.
	PruneMax   string
	PruneFloor int
}

// Describe says what the prune would do and why it was stopped, in one
// sentence without the approval.
func (h *PruneHold) Describe() string {
	var why string
	switch h.Reason {
	case HoldEmptyRender:
		why = fmt.Sprintf("nothing was rendered, so all %d members of the set would be deleted (%d tenants: %s)",
			h.Objects, len(h.Tenants), listSome(h.Tenants, 5))
	case HoldWholeFleet:
		why = fmt.Sprintf("it would remove every tenant of the fleet (%d of %d: %s; %d objects)",
			len(h.Tenants), h.Fleet, listSome(h.Tenants, 5), h.Objects)
	default:
		why = fmt.Sprintf("it would remove %d of the fleet's %d tenants (%s; %d objects), more than --prune-max %s "+
			"(at least --prune-floor %d) allows: %d", len(h.Tenants), h.Fleet, listSome(h.Tenants, 5), h.Objects,
			h.PruneMax, h.PruneFloor, h.Limit)
	}
	return why
}

// ApproveCommand is the kubectl command that approves exactly this prune for
// the set whose parent is parent.
func (h *PruneHold) ApproveCommand(parent ObjectRef) string {
	return fmt.Sprintf("kubectl annotate secret %s -n %s %s=%s --overwrite", parent.Name, parent.Namespace,
		AnnotationApprovePrune, h.Token)
}

// PruneRefusedError is the error of an Apply whose prune the guard stopped
// (without ApplyOptions.HoldPrune: nothing was changed). errors.Is matches
// ErrEmptyRender for an empty render and ErrMassPrune otherwise.
type PruneRefusedError struct {
	Hold   PruneHold
	Parent ObjectRef
}

// Error says what was refused and how to approve it.
func (e *PruneRefusedError) Error() string {
	return "refusing to prune: " + e.Hold.Describe() + "; nothing was changed; to approve exactly this prune: " +
		e.Hold.ApproveCommand(e.Parent) + " (then apply again), or pass --allow-mass-prune"
}

// Unwrap returns ErrEmptyRender or ErrMassPrune.
func (e *PruneRefusedError) Unwrap() error {
	if e.Hold.Reason == HoldEmptyRender {
		return ErrEmptyRender
	}
	return ErrMassPrune
}

// tenantsOf returns the tenant namespaces of the objects to apply: the names
// of Namespaces and the namespaces of namespaced objects, without the
// parent's.
func tenantsOf(objs []*desiredObject, parentNamespace string) sets.Set[string] {
	t := sets.New[string]()
	for _, d := range objs {
		switch {
		case d.ref.GroupKind() == namespaceGroupKind:
			t.Insert(d.ref.Name)
		case d.ref.Namespace != "":
			t.Insert(d.ref.Namespace)
		}
	}
	return t.Delete(parentNamespace, "")
}

// guardPrune decides whether plan may go ahead, from what the guard is for:
// stopping accidents (an empty render, a checkout that lost most of the
// fleet), not edits (a company or a few removed). It returns nil when the
// prune may go ahead, else the hold:
//
//   - nothing rendered and something to delete: held (EmptyRender);
//   - no tenant disappears: allowed (edits inside tenants);
//   - every tenant of the fleet disappears: held (WholeFleet);
//   - more tenants disappear than max(PruneMax of the fleet, PruneFloor):
//     held (OverLimit);
//   - otherwise allowed.
//
// AllowMassPrune, or an approval equal to the hold's token, lets it go ahead.
func guardPrune(plan *prunePlan, desiredTenants sets.Set[string], emptyRender bool, opts ApplyOptions, approvals ...string) (*PruneHold, error) {
	if len(plan.objects) == 0 || opts.AllowMassPrune {
		return nil, nil
	}
	gone := plan.tenants.Difference(desiredTenants)
	h := &PruneHold{Tenants: sets.List(gone), Fleet: plan.tenants.Len(), Objects: len(plan.objects),
		Token: plan.token(), PruneMax: opts.PruneMax.String(), PruneFloor: opts.PruneFloor}
	share, err := intstr.GetScaledValueFromIntOrPercent(&opts.PruneMax, h.Fleet, false)
	if err != nil {
		return nil, fmt.Errorf("invalid prune limit %q: %w", opts.PruneMax.String(), err)
	}
	h.Limit = min(max(share, opts.PruneFloor), max(h.Fleet-1, 0))
	switch {
	case emptyRender:
		h.Reason = HoldEmptyRender
	case gone.Len() == 0:
		return nil, nil
	case gone.Len() == h.Fleet:
		h.Reason = HoldWholeFleet
	case gone.Len() > h.Limit:
		h.Reason = HoldOverLimit
	default:
		return nil, nil
	}
	for _, a := range approvals {
		if a != "" && a == h.Token {
			return nil, nil
		}
	}
	return h, nil
}

// token is a digest of the objects the plan deletes and their UIDs: the value
// that approves exactly this prune.
func (p *prunePlan) token() string {
	lines := make([]string, 0, len(p.objects))
	for _, o := range p.objects {
		lines = append(lines, o.ref.String()+" "+string(o.uid))
	}
	sort.Strings(lines)
	sum := sha256.Sum256([]byte(strings.Join(lines, "\n")))
	return hex.EncodeToString(sum[:8])
}

// clearApproval removes AnnotationApprovePrune from the parent once the prune
// it approved is done.
func (m *Manager) clearApproval(ctx context.Context, inv *inventory) error {
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{AnnotationApprovePrune: nil}}})
	_, err := m.dyn.Resource(secretGVR).Namespace(inv.parent.Namespace).Patch(ctx, inv.parent.Name, types.MergePatchType,
		patch, metav1.PatchOptions{FieldManager: m.opts.FieldManager + "-applyset"})
	if err != nil {
		return fmt.Errorf("removing the prune approval from ApplySet parent %s: %w", inv.parent, err)
	}
	inv.approval = ""
	return nil
}

// listSome names up to n items and counts the rest.
func listSome(items []string, n int) string {
	if len(items) <= n {
		return strings.Join(items, ", ")
	}
	return strings.Join(items[:n], ", ") + fmt.Sprintf(", … and %d more", len(items)-n)
}
