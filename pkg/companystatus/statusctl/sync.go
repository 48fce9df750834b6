package statusctl

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"maps"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"

	"github.com/pcsync/pcsync/internal/lib/agentpod"
	cs "github.com/pcsync/pcsync/pkg/companystatus"
)

// changed is the informer's add and update handler: an object the
// controller wrote is now in the cache (its expectation met); any change
// is synced again (a hand edit is put back, once); a reconcile request not
// yet answered asks the loop for a reconcile.
func (c *Controller) changed(obj any) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return
	}
	name := u.GetName()
	c.mu.Lock()
	if w, ok := c.written[name]; ok && w.GetResourceVersion() == u.GetResourceVersion() {
		delete(c.written, name)
	}
	requested := ""
	if u.GetLabels()[cs.LabelOwner] == c.opts.Owner {
		if o, err := cs.FromUnstructured(u); err == nil {
			requested = o.Requested()
		}
	}
	if requested == "" {
		delete(c.answered, name)
	}
	fresh := requested != "" && c.pending[name].value != requested && c.answered[name] != requested
	if fresh {
		c.pending[name] = request{value: requested, seen: c.opts.Now()}
	}
	// An object of ours with no plan (its company left the config before
	// the informer showed it) is planned gone now.
	if _, planned := c.planned[name]; !planned && c.model != nil && u.GetLabels()[cs.LabelOwner] == c.opts.Owner {
		if _, kept := c.model.Company(name); !kept {
			c.replanLocked(maps.Clone(c.planned))
		}
	}
	c.mu.Unlock()
	c.queue.Add(name)
	if fresh {
		c.log.Info("reconcile requested", slog.String("company", name), slog.String("requestedAt", requested))
		c.opts.Trigger()
	}
}

// deleted is the informer's delete handler: a deleted object is written
// again when its company is still the controller's.
func (c *Controller) deleted(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	if u, ok := obj.(*unstructured.Unstructured); ok {
		c.mu.Lock()
		delete(c.written, u.GetName())
		c.mu.Unlock()
		c.queue.Add(u.GetName())
	}
}

// current is the object of that name as the controller knows it: what it
// wrote last while the informer does not show it yet, else the informer's;
// nil when there is none.
func (c *Controller) current(name string) (*unstructured.Unstructured, error) {
	c.mu.Lock()
	w := c.written[name]
	c.mu.Unlock()
	if w != nil {
		return w, nil
	}
	o, ok, err := c.informer.GetStore().GetByKey(c.opts.Namespace + "/" + name)
	if err != nil || !ok {
		return nil, err
	}
	return o.(*unstructured.Unstructured), nil
}

// sync makes the object of company name what its plan says, writing
// only what differs: its metadata and spec, then its status (each a
// server-side apply of field manager cs.FieldManager), or its deletion.
func (c *Controller) sync(ctx context.Context, name string) error {
	c.mu.Lock()
	p, ok := c.planned[name]
	c.mu.Unlock()
	if !ok {
		return nil
	}
	u, err := c.current(name)
	if err != nil {
		return err
	}
	if p.gone {
		return c.delete(ctx, u)
	}
	var cur *cs.CompanyStatus
	if u != nil {
		if cur, err = cs.FromUnstructured(u); err != nil {
			return err
		}
	}
	if cur == nil || cur.Spec != p.spec || !maps.Equal(pick(cur.Labels), c.labels(name)) {
		if u, err = c.apply(ctx, name, c.object(name, p.spec), ""); err != nil {
			return err
		}
		if cur, err = cs.FromUnstructured(u); err != nil {
			return err
		}
	}
	st := merge(cur, p.intent, cur.Generation, p.at)
	if sameStatus(st, cur.Status) {
		c.condition(true, "Recording", "the daemon records each company's status in "+cs.Resource+" of namespace "+c.opts.Namespace)
		return nil
	}
	body, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&st)
	if err != nil {
		return err
	}
	su := &unstructured.Unstructured{Object: map[string]any{"apiVersion": cs.APIVersion, "kind": cs.Kind,
		"metadata": map[string]any{"name": name, "namespace": c.opts.Namespace}, "status": body}}
	written, err := c.apply(ctx, name, su, "status")
	if err != nil {
		return err
	}
	if reason, msg, warning := event(cur, st); reason != "" {
		typ := corev1.EventTypeNormal
		if warning {
			typ = corev1.EventTypeWarning
		}
		c.recorder.Event(written, typ, reason, msg)
	}
	c.condition(true, "Recording", "the daemon records each company's status in "+cs.Resource+" of namespace "+c.opts.Namespace)
	return nil
}

// apply server-side applies u (its subresource, when not ""), and keeps
// the answer until the informer shows it.
func (c *Controller) apply(ctx context.Context, name string, u *unstructured.Unstructured, sub string) (*unstructured.Unstructured, error) {
	ri := c.dyn.Resource(cs.GVR).Namespace(c.opts.Namespace)
	opts := metav1.ApplyOptions{FieldManager: cs.FieldManager, Force: true}
	var out *unstructured.Unstructured
	var err error
	if sub == "status" {
		out, err = ri.ApplyStatus(ctx, name, u, opts)
	} else {
		out, err = ri.Apply(ctx, name, u, opts)
	}
	if err != nil {
		return nil, fmt.Errorf("%s %s/%s: apply %s: %w", cs.Kind, c.opts.Namespace, name, cmp.Or(sub, "object"), err)
	}
	c.mu.Lock()
	c.written[name] = out
	c.mu.Unlock()
	return out, nil
}

// delete deletes u (nil: nothing to delete), if it is still the one seen.
func (c *Controller) delete(ctx context.Context, u *unstructured.Unstructured) error {
	if u == nil || u.GetLabels()[cs.LabelOwner] != c.opts.Owner {
		return nil
	}
	uid := u.GetUID()
	err := c.dyn.Resource(cs.GVR).Namespace(c.opts.Namespace).Delete(ctx, u.GetName(),
		metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("%s %s/%s: delete: %w", cs.Kind, c.opts.Namespace, u.GetName(), err)
	}
	c.log.Info("company status deleted: the company left the config", slog.String("company", u.GetName()))
	c.mu.Lock()
	delete(c.written, u.GetName())
	c.mu.Unlock()
	return nil
}

// object is the company's object without its status.
func (c *Controller) object(name string, spec cs.Spec) *unstructured.Unstructured {
	labels := map[string]any{}
	for k, v := range c.labels(name) {
		labels[k] = v
	}
	specObj := map[string]any{"namespace": spec.Namespace}
	if spec.ID != "" {
		specObj["id"] = spec.ID
	}
	return &unstructured.Unstructured{Object: map[string]any{"apiVersion": cs.APIVersion, "kind": cs.Kind,
		"metadata": map[string]any{"name": name, "namespace": c.opts.Namespace, "labels": labels}, "spec": specObj}}
}

// labels are the labels the controller sets on company name's object.
func (c *Controller) labels(name string) map[string]string {
	return map[string]string{agentpod.LabelManagedBy: "pcsync", agentpod.LabelCompany: name, cs.LabelOwner: c.opts.Owner}
}

// pick is the labels of l the controller sets.
func pick(l map[string]string) map[string]string {
	out := map[string]string{}
	for _, k := range []string{agentpod.LabelManagedBy, agentpod.LabelCompany, cs.LabelOwner} {
		if v, ok := l[k]; ok {
			out[k] = v
		}
	}
	return out
}
