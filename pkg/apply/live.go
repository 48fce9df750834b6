package apply

import (
	"context"
	"fmt"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
)

// liveIndex holds the live members of the set, read with one LIST per resource across
// all namespaces, filtered by the part-of label. When listing across namespaces is
// forbidden it lists each namespace of interest instead.
type liveIndex struct {
	m          *Manager
	selector   string
	namespaces sets.Set[string]

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
		items, err := x.m.listAll(ctx, mapping.Resource, "", x.selector)
		if apierrors.IsForbidden(err) && namespaced(mapping) {
			items, err = x.listPerNamespace(ctx, mapping)
		}
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
