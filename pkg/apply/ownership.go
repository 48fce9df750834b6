package apply

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
)

// AnnotationAdopt, put by a person on an object that exists but is not a
// member of the set, hands it to the set on purpose: its value must be the
// owner the object is rendered for (ManagerOptions.OwnerLabel, the company's
// slug for pcsync's tenants). An adopted object is never deleted by prune:
// once no longer rendered it is released (ActionReleased).
const AnnotationAdopt = "pcsync.io/adopt"

// ErrNotOwned is matched (errors.Is) by the error of an object Apply and Diff
// leave alone because it, or its Namespace, exists and is not the set's.
var ErrNotOwned = errors.New("not owned by this ApplySet")

// NotOwnedError is an object that exists, is not a member of the set and
// carries no adoption mark for the owner it is rendered for. Apply and Diff
// send nothing for it, nor for the objects rendered into it when it is a
// Namespace.
type NotOwnedError struct {
	// Ref names the existing object.
	Ref ObjectRef
	// ApplySetID is the set that would have taken it.
	ApplySetID string
	// Owner is the value AnnotationAdopt must have to hand it over.
	Owner string
	// Mark is the AnnotationAdopt value it carries ("" for none).
	Mark string
	// Managers are its field managers, sorted, and Labels its labels.
	Managers []string
	Labels   map[string]string
	// Reserved says why it can never be adopted ("" when it can).
	Reserved string
}

// Error says whose the object is and how to hand it over, e.g.
// `Namespace/paperclip-system exists and is not pcsync's: … To adopt it on
// purpose: kubectl annotate namespace paperclip-system pcsync.io/adopt=system`.
func (e *NotOwnedError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s exists and is not in ApplySet %s", e.Ref, e.ApplySetID)
	if e.Reserved != "" {
		fmt.Fprintf(&b, ": it is %s, which the set never takes", e.Reserved)
		return b.String()
	}
	if set := e.Labels[LabelPartOf]; set != "" {
		fmt.Fprintf(&b, " (it belongs to ApplySet %s)", set)
	}
	b.WriteString("; ")
	if len(e.Managers) > 0 {
		fmt.Fprintf(&b, "field managers: %s; ", strings.Join(e.Managers, ", "))
	} else {
		b.WriteString("no field managers; ")
	}
	if len(e.Labels) > 0 {
		fmt.Fprintf(&b, "labels: %s; ", joinLabels(e.Labels))
	} else {
		b.WriteString("no labels; ")
	}
	if e.Mark != "" {
		fmt.Fprintf(&b, "its %s annotation names %q, not %q; ", AnnotationAdopt, e.Mark, e.Owner)
	}
	b.WriteString("it is left as it is. To adopt it on purpose: kubectl annotate ")
	if e.Ref.Namespace != "" {
		fmt.Fprintf(&b, "--namespace %s ", e.Ref.Namespace)
	}
	fmt.Fprintf(&b, "%s %s=%s", e.Ref.KubectlName(), AnnotationAdopt, e.Owner)
	if e.Mark != "" {
		b.WriteString(" --overwrite")
	}
	return b.String()
}

// Is matches ErrNotOwned.
func (e *NotOwnedError) Is(target error) bool { return target == ErrNotOwned }

// inNotOwnedNamespace is the error of an object rendered into a Namespace
// the set does not own.
type inNotOwnedNamespace struct{ ns string }

func (e inNotOwnedNamespace) Error() string {
	return fmt.Sprintf("skipped: its Namespace %s exists and is not in the set (see Namespace/%s)", e.ns, e.ns)
}

func (e inNotOwnedNamespace) Is(target error) bool { return target == ErrNotOwned }

func joinLabels(l map[string]string) string {
	keys := make([]string, 0, len(l))
	for k := range l {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + l[k]
	}
	return strings.Join(parts, ", ")
}

// owner is the adoption mark that hands an existing object to d: its
// OwnerLabel value, else its Namespace's name (its own for a Namespace).
func (m *Manager) owner(d *desiredObject) string {
	if v := d.obj.GetLabels()[m.opts.OwnerLabel]; m.opts.OwnerLabel != "" && v != "" {
		return v
	}
	if d.ref.GroupKind() == namespaceGroupKind {
		return d.ref.Name
	}
	return d.ref.Namespace
}

// isMember reports whether u carries the set's part-of label.
func isMember(u *unstructured.Unstructured, id string) bool {
	return u.GetLabels()[LabelPartOf] == id
}

// adopted reports whether u carries the adoption mark.
func adopted(u *unstructured.Unstructured) bool {
	_, ok := u.GetAnnotations()[AnnotationAdopt]
	return ok
}

// claim decides, before anything is sent, which of the objects that exist
// but are not members of the set it may take, and fails the others (d.err,
// ErrNotOwned). The set may take:
//   - what does not exist yet;
//   - what carries AnnotationAdopt naming the object's owner;
//   - an object in a Namespace the set created (a member without the mark);
//   - a member of a set of from (Handover.From: a tenant handed over).
//
// A Namespace it may not take fails with every object rendered into it, and
// the ApplySet parent's Namespace is never taken. With every object already
// a member (a steady sync), claim sends no request; otherwise it reads each
// Namespace concerned once and each object that may exist once.
func (m *Manager) claim(ctx context.Context, desired []*desiredObject, idx *liveIndex, inv *inventory, from sets.Set[string]) error {
	var strangers []*desiredObject
	for _, d := range desired {
		if d.err != nil || d.pending || d.mapping == nil || idx.get(d.mapping, d.ref) != nil {
			continue
		}
		strangers = append(strangers, d)
	}
	if len(strangers) == 0 {
		return nil
	}
	names := map[string]bool{}
	for _, d := range strangers {
		switch {
		case d.ref.GroupKind() == namespaceGroupKind:
			names[d.ref.Name] = true
		case namespaced(d.mapping):
			names[d.ref.Namespace] = true
		}
	}
	nsLive, err := m.readNamespaces(ctx, names)
	if err != nil {
		return err
	}
	notOwned := m.claimNamespaces(strangers, nsLive, inv, from)
	// Objects other than Namespaces: read those that may exist and are not
	// in a Namespace the set created.
	var check []*desiredObject
	for _, d := range strangers {
		if d.ref.GroupKind() == namespaceGroupKind {
			continue
		}
		if namespaced(d.mapping) {
			if notOwned[d.ref.Namespace] {
				d.err = objectError(d.ref, "apply", inNotOwnedNamespace{ns: d.ref.Namespace})
				continue
			}
			ns := nsLive[d.ref.Namespace]
			if ns == nil || (isMember(ns, inv.id) && !adopted(ns)) {
				continue // nothing can be in it yet, or the set created it
			}
		}
		check = append(check, d)
	}
	return m.claimObjects(ctx, check, inv, from)
}

// claimNamespaces fails each Namespace of strangers the set may not take
// (nsLive holds those that exist) and returns their names.
func (m *Manager) claimNamespaces(strangers []*desiredObject, nsLive map[string]*unstructured.Unstructured, inv *inventory,
	from sets.Set[string]) map[string]bool {
	notOwned := map[string]bool{}
	for _, d := range strangers {
		if d.ref.GroupKind() != namespaceGroupKind {
			continue
		}
		if d.ref.Name == inv.parent.Namespace {
			d.err = objectError(d.ref, "apply", &NotOwnedError{Ref: d.ref, ApplySetID: inv.id,
				Reserved: "the namespace of the ApplySet parent " + inv.parent.String()})
			notOwned[d.ref.Name] = true
			continue
		}
		if live := nsLive[d.ref.Name]; live != nil {
			if e := m.notOwned(d, live, inv.id, from); e != nil {
				d.err = objectError(d.ref, "apply", e)
				notOwned[d.ref.Name] = true
			}
		}
	}
	return notOwned
}

// claimObjects reads each object of check and fails those that exist and
// the set may not take.
func (m *Manager) claimObjects(ctx context.Context, check []*desiredObject, inv *inventory, from sets.Set[string]) error {
	errs := make([]error, len(check))
	forEach(ctx, m.opts.Workers, len(check), func(ctx context.Context, i int) {
		d := check[i]
		r := m.dyn.Resource(d.mapping.Resource)
		var live *unstructured.Unstructured
		var err error
		if d.ref.Namespace == "" {
			live, err = r.Get(ctx, d.ref.Name, getOptions())
		} else {
			live, err = r.Namespace(d.ref.Namespace).Get(ctx, d.ref.Name, getOptions())
		}
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			errs[i] = fmt.Errorf("%s: reading it to check whose it is: %w", d.ref, err)
		default:
			if e := m.notOwned(d, live, inv.id, from); e != nil {
				d.err = objectError(d.ref, "apply", e)
			}
		}
	})
	if err := ctx.Err(); err != nil {
		return err
	}
	return errors.Join(errs...)
}

// notOwned returns the error for live, the existing object d would take, or
// nil when it may take it: a member of this set or of a set of from (a
// handover) without the adoption mark, or an object adopted for d's owner.
func (m *Manager) notOwned(d *desiredObject, live *unstructured.Unstructured, id string, from sets.Set[string]) *NotOwnedError {
	set := live.GetLabels()[LabelPartOf]
	if (set == id || set != "" && from.Has(set)) && !adopted(live) {
		return nil
	}
	owner := m.owner(d)
	mark, marked := live.GetAnnotations()[AnnotationAdopt]
	if marked && mark == owner {
		return nil
	}
	e := &NotOwnedError{Ref: d.ref, ApplySetID: id, Owner: owner, Mark: mark, Labels: live.GetLabels()}
	seen := map[string]bool{}
	for _, f := range live.GetManagedFields() {
		if !seen[f.Manager] {
			seen[f.Manager] = true
			e.Managers = append(e.Managers, f.Manager)
		}
	}
	sort.Strings(e.Managers)
	return e
}

// readNamespaces returns the live Namespaces among names (nil for those
// that do not exist): a GET each for a few, one LIST for many.
func (m *Manager) readNamespaces(ctx context.Context, names map[string]bool) (map[string]*unstructured.Unstructured, error) {
	out := make(map[string]*unstructured.Unstructured, len(names))
	if len(names) == 0 {
		return out, nil
	}
	gvr := schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
	if len(names) > 8 {
		items, err := m.listAll(ctx, gvr, "", "")
		if err != nil {
			return nil, fmt.Errorf("listing namespaces to check whose they are: %w", err)
		}
		for i := range items {
			if names[items[i].GetName()] {
				out[items[i].GetName()] = &items[i]
			}
		}
		return out, nil
	}
	list := make([]string, 0, len(names))
	for n := range names {
		list = append(list, n)
	}
	var mu sync.Mutex
	errs := make([]error, len(list))
	forEach(ctx, m.opts.Workers, len(list), func(ctx context.Context, i int) {
		u, err := m.dyn.Resource(gvr).Get(ctx, list[i], getOptions())
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			errs[i] = fmt.Errorf("Namespace/%s: reading it to check whose it is: %w", list[i], err)
		default:
			mu.Lock()
			out[list[i]] = u
			mu.Unlock()
		}
	})
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return out, errors.Join(errs...)
}
