package apply

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
)

// Apply makes the cluster hold objs, server-side applied with the Manager's field
// manager, and records them in the ApplySet inventory:
//
//  1. the parent is read (a parent of another tool is refused) and the live members
//     are listed, one LIST per resource; an object that exists but is not a member
//     is left alone (ErrNotOwned), with every object of its Namespace when it is
//     one, unless a person marked it with AnnotationAdopt or the set created its
//     Namespace (see claim);
//  2. with Prune, the members no longer given are planned for deletion and the prune
//     guard looks at the plan (see guardPrune): a held prune refuses the call before
//     anything changes (a *PruneRefusedError), or with HoldPrune is only skipped and
//     reported in ChangeSet.PruneHeld;
//  3. the parent is updated to the union of its kinds and namespaces and those of objs
//     (as kubectl does, so an interrupted apply never leaks objects);
//  4. CRDs are applied and waited for until Established, then cluster-scoped objects
//     (Namespaces among them) and namespaced objects in parallel, each namespaced
//     object once its Namespace and every other cluster-scoped object is applied (a
//     tenant does not wait for the slowest of all the Namespaces); an object already
//     as desired is not sent at all;
//  5. with Prune, members no longer given are deleted: namespaced objects first, then
//     cluster-scoped ones, Namespaces, CRDs; then the parent lists exactly objs' kinds;
//  6. with Wait, Apply waits until every object is current and every pruned one gone.
//
// Objects that fail (a kind the cluster does not serve, a conflict, an immutable field)
// are reported in the ChangeSet and do not stop the others. The error is for failures of
// the whole call (the inventory, listing, a refused prune, a wait timeout); per-object
// failures are in ChangeSet.Err.
func (m *Manager) Apply(ctx context.Context, objs []*unstructured.Unstructured, opts ApplyOptions) (*ChangeSet, error) {
	c := m.newCall(opts.DryRun)
	defer c.done()
	report := c.report
	if err := opts.complete(); err != nil {
		return report, err
	}
	c.handover, c.partial = opts.Handover, opts.Partial
	report.Partial = opts.Partial
	t := time.Now()
	lap := func(d *time.Duration) { now := time.Now(); *d, t = now.Sub(t), now }
	err := c.load(ctx, objs)
	lap(&report.Stages.Read)
	if err != nil {
		return report, err
	}
	results := make([]Change, len(objs))
	for _, d := range c.desired {
		results[d.index] = Change{Ref: d.ref}
	}
	var pruned []Change
	// Objects not reached (an early error) are left out of the report.
	fill := func() {
		report.Objects = nil
		for _, r := range append(append([]Change(nil), results...), pruned...) {
			if r.Action != "" {
				report.Objects = append(report.Objects, r)
			}
		}
	}
	defer fill()

	plan, approvedBy, err := c.pruneForApply(ctx, len(objs) == 0, opts)
	lap(&report.Stages.Plan)
	if err != nil {
		return report, err
	}
	kinds, namespaces, err := c.applyAll(ctx, opts, results)
	lap(&report.Stages.Apply)
	if err != nil {
		return report, err
	}
	if plan != nil {
		applyFailed := slices.ContainsFunc(results, func(r Change) bool { return r.Action == ActionFailed })
		pruned, err = c.prune(ctx, plan, approvedBy, opts, applyFailed, kinds, namespaces)
		lap(&report.Stages.Prune)
		if err != nil {
			return report, err
		}
	}
	if opts.Wait && !opts.DryRun {
		fill()
		if err := m.Wait(ctx, report, WaitOptions{Timeout: opts.Timeout}); err != nil {
			return report, err
		}
	}
	return report, nil
}

// pruneForApply plans Apply's prune and runs the guard: no plan without
// opts.Prune or when the guard holds the prune (with HoldPrune, the hold
// goes in the report), a PruneRefusedError when it refuses it. approvedBy
// is the parent's approval token when it approves exactly this prune.
func (c *call) pruneForApply(ctx context.Context, emptyRender bool, opts ApplyOptions) (plan *prunePlan, approvedBy string, err error) {
	if !opts.Prune {
		return nil, "", nil
	}
	inv := c.inv
	plan, hold, err := c.planPrune(ctx, emptyRender, opts, opts.PruneApproval, inv.approval)
	if err != nil {
		return nil, "", err
	}
	switch {
	case hold != nil && !opts.HoldPrune:
		return nil, "", &PruneRefusedError{Hold: *hold, Parent: inv.parent}
	case hold != nil:
		c.report.PruneHeld = hold
		c.m.log.Debug("prune held", "reason", string(hold.Reason), "tenants", len(hold.Tenants))
		return nil, "", nil
	case len(plan.objects) > 0 && inv.approval != "" && inv.approval == plan.token():
		return plan, inv.approval, nil
	}
	return plan, "", nil
}

// applyAll applies the loaded objects in stages: the parent first records
// the kinds and namespaces about to be applied (widened, never narrowed
// here), then CRDs (waiting until Established, then resolving the objects
// of their kinds), then cluster-scoped objects and namespaced ones. Each
// object's outcome goes in results; it returns the set's kinds and
// namespaces for the parent once prune is done.
func (c *call) applyAll(ctx context.Context, opts ApplyOptions, results []Change) (sets.Set[schema.GroupKind], sets.Set[string], error) {
	m, desired, inv, idx := c.m, c.desired, c.inv, c.idx
	kinds, namespaces := setScope(desired)
	if !opts.DryRun {
		if err := m.writeInventory(ctx, inv, kinds.Union(inv.kinds), namespaces.Union(inv.namespaces)); err != nil {
			return nil, nil, err
		}
	}
	stages := byStage(desired)
	m.applyStage(ctx, stages[stageCRDs], idx, desired, opts, results)
	if len(stages[stageCRDs]) > 0 {
		m.waitEstablished(ctx, stages[stageCRDs], opts, results)
		m.mapper.Reset()
		// In a dry run the CRDs were not created: their objects stay pending and are
		// reported as created without a server check.
		m.resolve(desired, !opts.DryRun)
		var late []*desiredObject
		for _, d := range desired {
			if d.err == nil && d.mapping != nil && d.stage() != stageCRDs {
				late = append(late, d)
			}
		}
		if err := idx.loadAll(ctx, uniqueMappings(late)); err != nil {
			return nil, nil, err
		}
		kinds, namespaces = setScope(desired)
		if !opts.DryRun {
			if err := m.writeInventory(ctx, inv, kinds.Union(inv.kinds), namespaces.Union(inv.namespaces)); err != nil {
				return nil, nil, err
			}
		}
		stages = byStage(desired)
	}
	m.applyInOrder(ctx, stages[stageClusterScoped], stages[stageNamespaced], idx, desired, opts, results)
	for _, d := range desired {
		switch {
		case d.pending:
			// A dry run cannot create the CRD, so the server cannot check its objects.
			results[d.index] = Change{Ref: d.ref, Action: ActionCreated}
		case d.err != nil && results[d.index].Action == "":
			results[d.index] = Change{Ref: d.ref, Action: ActionFailed, Err: d.err}
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	return kinds, namespaces, nil
}

// prune deletes (or releases) what the plan names, then narrows the
// parent to kinds and namespaces when everything went through (no apply or
// prune failure, nothing retained), and clears the parent's approval that
// approvedBy names.
func (c *call) prune(ctx context.Context, plan *prunePlan, approvedBy string, opts ApplyOptions, applyFailed bool,
	kinds sets.Set[schema.GroupKind], namespaces sets.Set[string]) ([]Change, error) {
	m, inv := c.m, c.inv
	pruned, pruneFailed := m.prune(ctx, plan, opts)
	retained := slices.ContainsFunc(pruned, func(r Change) bool { return r.Action == ActionRetained })
	if !opts.DryRun && !applyFailed && !pruneFailed && !retained {
		kinds, namespaces = kinds.Union(plan.keptKinds), namespaces.Union(plan.keptNamespaces)
		if err := m.writeInventory(ctx, inv, kinds, namespaces); err != nil {
			return pruned, fmt.Errorf("apply and prune succeeded, but: %w", err)
		}
	}
	if approvedBy != "" && !opts.DryRun {
		m.log.Info("prune approved by the ApplySet parent's annotation", "token", approvedBy)
		if err := m.clearApproval(ctx, inv); err != nil {
			return pruned, err
		}
	}
	return pruned, nil
}

// setScope returns the kinds and namespaces of the resolved objects, for the parent's
// annotations.
func setScope(objs []*desiredObject) (sets.Set[schema.GroupKind], sets.Set[string]) {
	kinds, namespaces := sets.New[schema.GroupKind](), sets.New[string]()
	for _, d := range objs {
		if d.mapping == nil || d.err != nil {
			continue
		}
		kinds.Insert(d.ref.GroupKind())
		if namespaced(d.mapping) {
			namespaces.Insert(d.ref.Namespace)
		}
	}
	return kinds, namespaces
}

// interestingNamespaces are the namespaces listed one by one when listing across all
// namespaces is forbidden.
func (m *Manager) interestingNamespaces(inv *inventory, objs []*desiredObject) sets.Set[string] {
	ns := inv.namespaces.Clone().Insert(inv.parent.Namespace)
	for _, d := range objs {
		if d.ref.Namespace != "" {
			ns.Insert(d.ref.Namespace)
		}
	}
	return ns
}

// applyStage applies one stage's objects in parallel.
func (m *Manager) applyStage(ctx context.Context, objs []*desiredObject, idx *liveIndex, all []*desiredObject,
	opts ApplyOptions, results []Change) {
	m.applyInOrder(ctx, objs, nil, idx, all, opts, results)
}

// applyInOrder applies cluster-scoped and namespaced objects on the Manager's
// workers, each namespaced object after its own Namespace (when it is among the
// objects) and after every cluster-scoped object that is not a Namespace: a tenant's
// objects start as soon as its Namespace is there, not when the last of all the
// Namespaces is.
func (m *Manager) applyInOrder(ctx context.Context, cluster, inNamespaces []*desiredObject, idx *liveIndex,
	all []*desiredObject, opts ApplyOptions, results []Change) {
	total := len(cluster) + len(inNamespaces)
	if total == 0 {
		return
	}
	creatingNS := sets.New[string]()
	for _, d := range all {
		if d.ref.GroupKind() == namespaceGroupKind && d.mapping != nil && idx.get(d.mapping, d.ref) == nil {
			creatingNS.Insert(d.ref.Name)
		}
	}
	// What each namespaced object waits for: its Namespace (pendingNS) and the other
	// cluster-scoped objects (othersLeft).
	var (
		mu         sync.Mutex
		queue      = make(chan *desiredObject, total)
		left       = total
		othersLeft = 0
		pendingNS  = sets.New[string]()
		waiting    = map[string][]*desiredObject{}
	)
	for _, d := range cluster {
		if d.ref.GroupKind() == namespaceGroupKind {
			pendingNS.Insert(d.ref.Name)
		} else {
			othersLeft++
		}
		queue <- d
	}
	release := func(ns string) { // with mu held
		for _, d := range waiting[ns] {
			queue <- d
		}
		delete(waiting, ns)
	}
	for _, d := range inNamespaces {
		if othersLeft == 0 && !pendingNS.Has(d.ref.Namespace) {
			queue <- d
		} else {
			waiting[d.ref.Namespace] = append(waiting[d.ref.Namespace], d)
		}
	}
	done := func(d *desiredObject) {
		mu.Lock()
		defer mu.Unlock()
		if d.mapping != nil && !namespaced(d.mapping) {
			if d.ref.GroupKind() == namespaceGroupKind {
				pendingNS.Delete(d.ref.Name)
				if othersLeft == 0 {
					release(d.ref.Name)
				}
			} else if othersLeft--; othersLeft == 0 {
				for ns := range waiting {
					if !pendingNS.Has(ns) {
						release(ns)
					}
				}
			}
		}
		if left--; left == 0 {
			close(queue)
		}
	}
	var wg sync.WaitGroup
	for w := 0; w < max(1, min(m.opts.Workers, total)); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for d := range queue {
				if ctx.Err() == nil { // objects not started when ctx ends are skipped
					m.applyAndRecord(ctx, d, idx, opts, creatingNS, results)
				}
				done(d)
			}
		}()
	}
	wg.Wait()
}

// applyAndRecord applies one object and records its Change.
func (m *Manager) applyAndRecord(ctx context.Context, d *desiredObject, idx *liveIndex, opts ApplyOptions,
	creatingNS sets.Set[string], results []Change) {
	action, err := m.applyOne(ctx, d, idx.get(d.mapping, d.ref), opts, creatingNS)
	if err != nil {
		err = objectError(d.ref, "apply", redact(err, d.obj))
		m.log.Debug("apply failed", "object", d.ref.String(), "error", err)
	} else {
		m.log.Debug("applied", "object", d.ref.String(), "action", string(action))
	}
	results[d.index] = Change{Ref: d.ref, Action: action, Err: err}
}

// applyOne applies one object unless live shows it is already as desired.
func (m *Manager) applyOne(ctx context.Context, d *desiredObject, live *unstructured.Unstructured, opts ApplyOptions,
	creatingNS sets.Set[string]) (Action, error) {
	if live != nil && live.GetDeletionTimestamp() == nil {
		ok, why := m.upToDate(d.obj, live)
		if ok {
			return ActionUnchanged, nil
		}
		m.log.Debug("object differs", "object", d.ref.String(), "reason", why)
	}
	out, created, err := m.patchApply(ctx, d.mapping, d.ref.Namespace, d.ref.Name, d.body, m.opts.FieldManager,
		opts.ForceConflicts, opts.DryRun)
	if err != nil {
		if opts.DryRun && apierrors.IsNotFound(err) && creatingNS.Has(d.ref.Namespace) {
			// Its namespace is created by this apply; the server cannot dry-run it yet.
			return ActionCreated, nil
		}
		err = explainApplyError(err)
		if errors.Is(err, ErrImmutable) && opts.Force {
			return m.recreate(ctx, d, opts)
		}
		return ActionFailed, err
	}
	switch {
	case created:
		return ActionCreated, nil
	case live == nil:
		return ActionConfigured, nil
	case opts.DryRun && sameObject(out, live):
		return ActionUnchanged, nil
	case !opts.DryRun && out.GetResourceVersion() == live.GetResourceVersion():
		return ActionUnchanged, nil
	default:
		return ActionConfigured, nil
	}
}

// sameObject compares two versions of an object, ignoring what changes on every write
// or dry run (resourceVersion, generation, managedFields timestamps).
func sameObject(a, b *unstructured.Unstructured) bool {
	strip := func(u *unstructured.Unstructured) map[string]any {
		c := u.DeepCopy()
		unstructured.RemoveNestedField(c.Object, "metadata", "resourceVersion")
		unstructured.RemoveNestedField(c.Object, "metadata", "generation")
		mf := c.GetManagedFields()
		for i := range mf {
			mf[i].Time = nil
		}
		c.SetManagedFields(mf)
		return c.Object
	}
	return reflect.DeepEqual(strip(a), strip(b))
}

// recreate deletes an object and applies it again (Force on an immutable field).
func (m *Manager) recreate(ctx context.Context, d *desiredObject, opts ApplyOptions) (Action, error) {
	if err := m.deleteObject(ctx, d.mapping, d.ref.Namespace, d.ref.Name, "", opts.DryRun); err != nil && !apierrors.IsNotFound(err) {
		return ActionFailed, fmt.Errorf("deleting it to recreate it: %w", err)
	}
	if opts.DryRun {
		return ActionRecreated, nil
	}
	res := m.dyn.Resource(d.mapping.Resource)
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, opts.Timeout, true, func(ctx context.Context) (bool, error) {
		var err error
		if d.ref.Namespace == "" {
			_, err = res.Get(ctx, d.ref.Name, getOptions())
		} else {
			_, err = res.Namespace(d.ref.Namespace).Get(ctx, d.ref.Name, getOptions())
		}
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, nil // still there, or transient: try again until the timeout
	})
	if err != nil {
		return ActionFailed, fmt.Errorf("waiting for the old object to be deleted: %w", err)
	}
	if _, _, err := m.patchApply(ctx, d.mapping, d.ref.Namespace, d.ref.Name, d.body, m.opts.FieldManager,
		opts.ForceConflicts, false); err != nil {
		return ActionFailed, fmt.Errorf("recreating it after deleting it: %w", explainApplyError(err))
	}
	return ActionRecreated, nil
}

// waitEstablished waits until the applied CRDs are Established and marks those that
// are not as failed.
func (m *Manager) waitEstablished(ctx context.Context, crds []*desiredObject, opts ApplyOptions, results []Change) {
	if opts.DryRun {
		return
	}
	var waiting []*desiredObject
	for _, d := range crds {
		if results[d.index].Action != ActionFailed {
			waiting = append(waiting, d)
		}
	}
	pending := map[int]bool{}
	for _, d := range waiting {
		pending[d.index] = true
	}
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, opts.Timeout, true, func(ctx context.Context) (bool, error) {
		for _, d := range waiting {
			if !pending[d.index] {
				continue
			}
			u, err := m.dyn.Resource(d.mapping.Resource).Get(ctx, d.ref.Name, getOptions())
			if err != nil {
				// Not there yet, or transient: try again until the timeout.
				m.log.Debug("waiting for a CRD", "object", d.ref.String(), "error", err)
				continue
			}
			if crdEstablished(u) {
				delete(pending, d.index)
			}
		}
		return len(pending) == 0, nil
	})
	if err == nil {
		return
	}
	for _, d := range waiting {
		if pending[d.index] {
			results[d.index] = Change{Ref: d.ref, Action: ActionFailed,
				Err: objectError(d.ref, "apply", fmt.Errorf("not Established within %s: %w", opts.Timeout, err))}
		}
	}
}

func crdEstablished(u *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		cm, ok := c.(map[string]any)
		if ok && cm["type"] == "Established" && cm["status"] == "True" {
			return true
		}
	}
	return false
}
