package apply

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/discovery"
)

// prunePlan is what a prune would delete.
type prunePlan struct {
	// members is the number of live members of the set.
	members int
	// objects are the members that are no longer desired, in deletion order.
	objects []pruneObject
	// tenants are the namespaces that hold live members (see tenantsOf).
	tenants sets.Set[string]
	// keptKinds and keptNamespaces are those of the members left to
	// another set (Handover.Keep): the parent goes on listing them.
	keptKinds      sets.Set[schema.GroupKind]
	keptNamespaces sets.Set[string]
}

type pruneObject struct {
	ref     ObjectRef
	mapping *meta.RESTMapping
	uid     types.UID
	obj     *unstructured.Unstructured
	// release: the object was adopted (AnnotationAdopt), so it is let go,
	// not deleted.
	release bool
}

// pruneOrder: namespaced objects, then cluster-scoped ones, then Namespaces, then CRDs
// (so that nothing is deleted from under the objects that depend on it).
func (p pruneObject) order() int {
	switch {
	case namespaced(p.mapping):
		return 0
	case p.ref.GroupKind() == namespaceGroupKind:
		return 2
	case p.ref.GroupKind() == crdGroupKind:
		return 3
	default:
		return 1
	}
}

// planPrune lists the set's members of every kind the parent names or objs have, and
// returns those not among objs. Only objects that carry this set's part-of label are
// ever candidates, and never the namespace that holds the parent nor the members in
// keep (tenants handed over to another set: neither deleted nor counted).
func (m *Manager) planPrune(ctx context.Context, inv *inventory, objs []*desiredObject, idx *liveIndex,
	keep sets.Set[string]) (*prunePlan, error) {
	mappings, err := m.pruneMappings(inv, objs)
	if err != nil {
		return nil, err
	}
	if err := idx.loadAll(ctx, mappings); err != nil {
		return nil, err
	}
	wanted := map[objKey]bool{}
	for _, d := range objs {
		wanted[d.ref.key()] = true
	}
	byResource := map[schema.GroupVersionResource]*meta.RESTMapping{}
	for _, mp := range mappings {
		byResource[mp.Resource] = mp
	}
	plan := &prunePlan{tenants: sets.New[string](), keptKinds: sets.New[schema.GroupKind](), keptNamespaces: sets.New[string]()}
	seen := map[objKey]bool{}
	for gvr, items := range idx.members() {
		mp := byResource[gvr]
		if mp == nil {
			continue
		}
		gk := mp.GroupVersionKind.GroupKind()
		for _, u := range items {
			if u.GetLabels()[LabelPartOf] != inv.id {
				continue // the selector already ensures this; never trust it alone
			}
			ref := ObjectRef{Group: gk.Group, Version: mp.GroupVersionKind.Version, Kind: gk.Kind,
				Namespace: u.GetNamespace(), Name: u.GetName()}
			if seen[ref.key()] {
				continue
			}
			seen[ref.key()] = true
			if u.GetDeletionTimestamp() != nil {
				continue
			}
			if tenant := tenantOf(ref); keep.Has(tenant) && !wanted[ref.key()] {
				plan.keptKinds.Insert(gk)
				if ref.Namespace != "" {
					plan.keptNamespaces.Insert(ref.Namespace)
				}
				continue
			}
			plan.members++
			if tenant := tenantOf(ref); tenant != "" {
				plan.tenants.Insert(tenant)
			}
			if wanted[ref.key()] {
				continue
			}
			if gk == namespaceGroupKind && ref.Name == inv.parent.Namespace {
				continue
			}
			plan.objects = append(plan.objects, pruneObject{ref: ref, mapping: mp, uid: u.GetUID(), obj: u, release: adopted(u)})
		}
	}
	plan.tenants.Delete(inv.parent.Namespace)
	sortPrune(plan.objects)
	return plan, nil
}

// tenantOf is the tenant an object belongs to: a Namespace's name, a
// namespaced object's namespace, "" for other cluster-scoped objects.
func tenantOf(ref ObjectRef) string {
	if ref.GroupKind() == namespaceGroupKind {
		return ref.Name
	}
	return ref.Namespace
}

// pruneMappings returns the mappings of the kinds objs have and of those
// the parent names that the cluster still serves.
func (m *Manager) pruneMappings(inv *inventory, objs []*desiredObject) ([]*meta.RESTMapping, error) {
	mappings := uniqueMappings(objs)
	have := map[schema.GroupKind]bool{}
	for _, mp := range mappings {
		have[mp.GroupVersionKind.GroupKind()] = true
	}
	for _, gk := range sortedKinds(inv.kinds) {
		if have[gk] {
			continue
		}
		mp, err := m.mapper.RESTMapping(gk)
		if meta.IsNoMatchError(err) {
			// The kind is gone from the cluster (e.g. its CRD was deleted), and with it
			// every object of the kind.
			m.log.Warn("the ApplySet lists a kind the cluster no longer serves", "kind", gk.String())
			continue
		}
		if err != nil {
			return nil, err
		}
		have[gk] = true
		mappings = append(mappings, mp)
	}
	return mappings, nil
}

// sortPrune orders objects for deletion: by order group, then namespace,
// kind and name.
func sortPrune(objects []pruneObject) {
	sort.SliceStable(objects, func(i, j int) bool {
		a, b := objects[i], objects[j]
		if a.order() != b.order() {
			return a.order() < b.order()
		}
		if a.ref.Namespace != b.ref.Namespace {
			return a.ref.Namespace < b.ref.Namespace
		}
		if a.ref.Kind != b.ref.Kind {
			return a.ref.Kind < b.ref.Kind
		}
		return a.ref.Name < b.ref.Name
	})
}

// prune deletes the planned objects, one order group after the other, each group in
// parallel. A deletion is conditional on the UID that was listed, so an object
// recreated by someone else in the meantime is left alone.
func (m *Manager) prune(ctx context.Context, plan *prunePlan, opts ApplyOptions) ([]Change, bool) {
	results := make([]Change, len(plan.objects))
	failed := false
	for lo := 0; lo < len(plan.objects); {
		hi := lo
		for hi < len(plan.objects) && plan.objects[hi].order() == plan.objects[lo].order() {
			hi++
		}
		group := plan.objects[lo:hi]
		forEach(ctx, m.opts.Workers, len(group), func(ctx context.Context, i int) {
			p := group[i]
			if p.release {
				results[lo+i] = m.release(ctx, p, opts)
				return
			}
			if p.ref.GroupKind() == namespaceGroupKind {
				if note := m.namespaceHoldsOthers(ctx, p.ref.Name, plan); note != "" {
					results[lo+i] = Change{Ref: p.ref, Action: ActionRetained, Prune: true, Note: note}
					return
				}
			}
			err := m.deleteObject(ctx, p.mapping, p.ref.Namespace, p.ref.Name, p.uid, opts.DryRun)
			if apierrors.IsNotFound(err) {
				err = nil
			}
			r := Change{Ref: p.ref, Action: ActionPruned, Prune: true}
			if err != nil {
				r = Change{Ref: p.ref, Action: ActionFailed, Prune: true, Err: objectError(p.ref, "prune", redact(err, p.obj))}
			}
			results[lo+i] = r
		})
		lo = hi
	}
	for _, r := range results {
		if r.Action == ActionFailed {
			failed = true
		}
	}
	return results, failed
}

// release lets go of an adopted member: a server-side apply of nothing by the
// set's field manager removes every field only it owns (its labels, the
// set's part-of label, its annotations), and leaves the object and what
// others own. The object was there before the set; it stays after it.
func (m *Manager) release(ctx context.Context, p pruneObject, opts ApplyOptions) Change {
	if _, err := m.releaseRequest(ctx, p, opts.DryRun); err != nil {
		return Change{Ref: p.ref, Action: ActionFailed, Prune: true, Err: objectError(p.ref, "release", err)}
	}
	return Change{Ref: p.ref, Action: ActionReleased, Prune: true,
		Note: "adopted (" + AnnotationAdopt + "), so let go instead of deleted: pcsync's fields were removed, the object stays"}
}

// releaseRequest sends the release of p and returns the object it leaves
// (nil when p is gone already).
func (m *Manager) releaseRequest(ctx context.Context, p pruneObject, dryRun bool) (*unstructured.Unstructured, error) {
	body, err := json.Marshal(map[string]any{
		"apiVersion": p.obj.GetAPIVersion(),
		"kind":       p.obj.GetKind(),
		"metadata":   map[string]any{"name": p.ref.Name, "namespace": p.ref.Namespace, "uid": string(p.uid)},
	})
	if err != nil {
		return nil, err
	}
	out, _, err := m.patchApply(ctx, p.mapping, p.ref.Namespace, p.ref.Name, body, m.opts.FieldManager, true, dryRun)
	switch {
	case apierrors.IsNotFound(err), apierrors.IsConflict(err):
		// The uid in the body makes the request fail with a conflict when the
		// object is gone, or was replaced by someone else's: nothing to let go.
		return nil, nil
	case err != nil:
		return nil, redact(explainApplyError(err), p.obj)
	}
	return out, nil
}

// namespaceHoldsOthers checks whether a Namespace about to be pruned still holds
// objects that are not members of the set being pruned (deleting the Namespace would
// delete them too: agent Jobs, Secrets created by hand, …). It lists every namespaced
// resource in it (the plan's own members, objects already being deleted, objects
// another object of the namespace owns, a kept sandbox lease's claim, events and
// what Kubernetes puts in every namespace do not count) and returns why the Namespace
// must be kept, or "" if it may go. When it cannot tell, it keeps the Namespace.
func (m *Manager) namespaceHoldsOthers(ctx context.Context, ns string, plan *prunePlan) string {
	lists, err := discovery.ServerPreferredNamespacedResources(m.disc)
	if err != nil && len(lists) == 0 {
		return "cannot tell whether it holds objects that are not in the set: " + err.Error()
	}
	pruning := map[objKey]bool{}
	for _, p := range plan.objects {
		pruning[p.ref.key()] = true
	}
	resources, namespaced := listableResources(lists)
	var mu sync.Mutex
	var others []string
	var failures []string
	forEach(ctx, m.opts.Workers, len(resources), func(ctx context.Context, i int) {
		r := resources[i]
		list, err := m.dyn.Resource(r.gvr).Namespace(ns).List(ctx, metav1.ListOptions{Limit: 50})
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			if !apierrors.IsNotFound(err) && !apierrors.IsMethodNotSupported(err) {
				failures = append(failures, r.gvr.GroupResource().String())
			}
			return
		}
		for _, u := range list.Items {
			key := objKey{group: r.gvr.Group, kind: r.kind, namespace: ns, name: u.GetName()}
			switch {
			case u.GetDeletionTimestamp() != nil, pruning[key], ownedHere(&u, namespaced), keptLeaseClaim(r, &u),
				r.gvr.Group == "" && r.kind == "ServiceAccount" && u.GetName() == "default",
				r.gvr.Group == "" && r.kind == "ConfigMap" && u.GetName() == "kube-root-ca.crt":
				continue
			}
			others = append(others, strings.ToLower(r.kind)+"/"+u.GetName())
		}
	})
	if len(failures) > 0 {
		sort.Strings(failures)
		return "cannot tell whether it holds objects that are not in the set (listing " +
			strings.Join(failures, ", ") + " failed)"
	}
	if len(others) == 0 {
		return ""
	}
	sort.Strings(others)
	more := ""
	if len(others) > 5 {
		more = fmt.Sprintf(" and %d more", len(others)-5)
		others = others[:5]
	}
	return "holds objects that are not in the set, which deleting it would delete too: " +
		strings.Join(others, ", ") + more + "; it is pruned once they are gone"
}

// labelSandboxLease is the label of a kept sandbox lease's claim
// (leasepod.LabelLease, which this package does not import).
const labelSandboxLease = "pcsync.io/sandbox-lease"

// keptLeaseClaim reports whether u, of resource r, is the claim pcsync's
// daemon keeps a suspended sandbox lease's workspace on. It belongs to the
// tenant: it does not keep its Namespace from being pruned, and goes with
// it (the daemon then ends the lease).
func keptLeaseClaim(r nsResource, u metav1.Object) bool {
	l := u.GetLabels()
	return r.gvr.Group == "" && r.kind == "PersistentVolumeClaim" &&
		l["app.kubernetes.io/managed-by"] == "pcsync" && l[labelSandboxLease] != ""
}

// nsResource is a namespaced resource namespaceHoldsOthers lists.
type nsResource struct {
	gvr  schema.GroupVersionResource
	kind string
}

// listableResources returns the namespaced resources of lists that are
// listed for objects (not subresources, events or the deprecated
// Endpoints), and every namespaced kind.
func listableResources(lists []*metav1.APIResourceList) (resources []nsResource, namespaced map[schema.GroupKind]bool) {
	namespaced = map[schema.GroupKind]bool{}
	for _, l := range lists {
		gv, perr := schema.ParseGroupVersion(l.GroupVersion)
		if perr != nil {
			continue
		}
		for _, r := range l.APIResources {
			namespaced[schema.GroupKind{Group: gv.Group, Kind: r.Kind}] = true
			if strings.Contains(r.Name, "/") || !slices.Contains(r.Verbs, "list") || r.Name == "events" ||
				(gv.Group == "" && r.Name == "endpoints") { // deprecated; EndpointSlices show the same
				continue
			}
			resources = append(resources, nsResource{gvr: gv.WithResource(r.Name), kind: r.Kind})
		}
	}
	return resources, namespaced
}

// ownedHere reports whether an object of a namespaced kind owns u. Such an
// object is not counted (its owner, in this namespace, is: counted, or
// pruned, and the garbage collector then deletes it: a pruned Deployment's
// ReplicaSet and pods, a pruned Service's EndpointSlices).
func ownedHere(u metav1.Object, namespaced map[schema.GroupKind]bool) bool {
	for _, o := range u.GetOwnerReferences() {
		if gv, err := schema.ParseGroupVersion(o.APIVersion); err == nil && namespaced[schema.GroupKind{Group: gv.Group, Kind: o.Kind}] {
			return true
		}
	}
	return false
}
