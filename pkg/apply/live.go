package apply

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
)

// liveIndex holds the live members of the set, read with one LIST per resource across
// all namespaces, filtered by the part-of label. When listing across namespaces is
// forbidden it lists each namespace of interest instead. With only set (a partial
// Apply), a resource whose objects among only lie in a few namespaces (or, cluster-
// scoped, are few) is read just there.
type liveIndex struct {
	m          *Manager
	id         string
	selector   string
	namespaces sets.Set[string]
	only       []*desiredObject

	mu    sync.Mutex
	lists map[schema.GroupVersionResource]*liveList
}

type liveList struct {
	once  sync.Once
	gk    schema.GroupKind
	items map[objKey]*unstructured.Unstructured
	err   error
}

func (m *Manager) newLiveIndex(id string, namespaces sets.Set[string]) *liveIndex {
	return &liveIndex{
		m:          m,
		id:         id,
		selector:   LabelPartOf + "=" + id,
		namespaces: namespaces,
		lists:      map[schema.GroupVersionResource]*liveList{},
	}
}

// load lists the members of one resource (once per index).
func (x *liveIndex) load(ctx context.Context, mapping *meta.RESTMapping) error {
	x.mu.Lock()
	l, ok := x.lists[mapping.Resource]
	if !ok {
		l = &liveList{gk: mapping.GroupVersionKind.GroupKind()}
		x.lists[mapping.Resource] = l
	}
	x.mu.Unlock()
	l.once.Do(func() {
		items, err := x.list(ctx, mapping)
		if err != nil {
			l.err = fmt.Errorf("listing %s: %w", mapping.Resource.GroupResource(), err)
			return
		}
		l.items = make(map[objKey]*unstructured.Unstructured, len(items))
		for i := range items {
			u := &items[i]
			k := objKey{group: l.gk.Group, kind: l.gk.Kind, namespace: u.GetNamespace(), name: u.GetName()}
			l.items[k] = u
		}
	})
	return l.err
}

// list reads the members of one resource.
func (x *liveIndex) list(ctx context.Context, mapping *meta.RESTMapping) ([]unstructured.Unstructured, error) {
	if x.only != nil {
		if items, ok, err := x.listWhere(ctx, mapping); ok {
			return items, err
		}
	}
	items, err := x.m.listAll(ctx, mapping.Resource, "", x.selector)
	if apierrors.IsForbidden(err) && namespaced(mapping) {
		items, err = x.listPerNamespace(ctx, mapping)
	}
	return items, err
}

// scopedReads is the most namespaces (or cluster-scoped objects) of one
// resource a partial Apply reads one by one instead of listing them all.
const scopedReads = 16

// listWhere reads the members of one resource where the objects of only
// are: a LIST per namespace, or a GET per cluster-scoped object. ok is
// false when they are too many for that (or none).
func (x *liveIndex) listWhere(ctx context.Context, mapping *meta.RESTMapping) (_ []unstructured.Unstructured, ok bool, _ error) {
	where := sets.New[string]()
	for _, d := range x.only {
		if d.mapping != nil && d.mapping.Resource == mapping.Resource {
			where.Insert(cmp.Or(d.ref.Namespace, d.ref.Name))
		}
	}
	if where.Len() == 0 || where.Len() > scopedReads {
		return nil, false, nil
	}
	names := sets.List(where)
	found := make([][]unstructured.Unstructured, len(names))
	errs := make([]error, len(names))
	forEach(ctx, x.m.opts.Workers, len(names), func(ctx context.Context, i int) {
		found[i], errs[i] = x.read(ctx, mapping, names[i])
	})
	if err := cmp.Or(errors.Join(errs...), ctx.Err()); err != nil {
		return nil, true, err
	}
	return slices.Concat(found...), true, nil
}

// read lists the members in namespace where, or GETs the cluster-scoped
// object named where and keeps it if it is a member.
func (x *liveIndex) read(ctx context.Context, mapping *meta.RESTMapping, where string) ([]unstructured.Unstructured, error) {
	if namespaced(mapping) {
		items, err := x.m.listAll(ctx, mapping.Resource, where, x.selector)
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return items, err
	}
	u, err := x.m.dyn.Resource(mapping.Resource).Get(ctx, where, getOptions())
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, err
	case !isMember(u, x.id):
		return nil, nil
	}
	return []unstructured.Unstructured{*u}, nil
}

func (x *liveIndex) listPerNamespace(ctx context.Context, mapping *meta.RESTMapping) ([]unstructured.Unstructured, error) {
	var out []unstructured.Unstructured
	for _, ns := range sets.List(x.namespaces) {
		items, err := x.m.listAll(ctx, mapping.Resource, ns, x.selector)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, items...)
	}
	return out, nil
}

// loadAll lists the given resources in parallel.
func (x *liveIndex) loadAll(ctx context.Context, mappings []*meta.RESTMapping) error {
	errs := make([]error, len(mappings))
	forEach(ctx, x.m.opts.Workers, len(mappings), func(ctx context.Context, i int) {
		errs[i] = x.load(ctx, mappings[i])
	})
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return ctx.Err()
}

// get returns the live member named by ref, or nil. Its resource must be loaded.
func (x *liveIndex) get(mapping *meta.RESTMapping, ref ObjectRef) *unstructured.Unstructured {
	x.mu.Lock()
	l := x.lists[mapping.Resource]
	x.mu.Unlock()
	if l == nil || l.items == nil {
		return nil
	}
	return l.items[ref.key()]
}

// members returns every loaded member, per resource.
func (x *liveIndex) members() map[schema.GroupVersionResource][]*unstructured.Unstructured {
	x.mu.Lock()
	defer x.mu.Unlock()
	out := map[schema.GroupVersionResource][]*unstructured.Unstructured{}
	for gvr, l := range x.lists {
		for _, u := range l.items {
			out[gvr] = append(out[gvr], u)
		}
	}
	return out
}

// uniqueMappings returns the distinct mappings (by resource) of the resolved objects.
func uniqueMappings(objs []*desiredObject) []*meta.RESTMapping {
	seen := map[schema.GroupVersionResource]bool{}
	var out []*meta.RESTMapping
	for _, d := range objs {
		if d.mapping == nil || d.err != nil || seen[d.mapping.Resource] {
			continue
		}
		seen[d.mapping.Resource] = true
		out = append(out, d.mapping)
	}
	return out
}
