package apply

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"sort"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/sets"
)

// AnnotationAppliedHash holds a digest of the configuration pcsync last applied to an
// object. Together with managedFields it lets pcsync see, from a LIST, that an object
// is already as desired — including fields removed from the configuration inside
// atomic lists and maps, which managedFields alone cannot show.
const AnnotationAppliedHash = "pcsync.io/applied-hash"

// stage orders the apply: CRDs, then cluster-scoped objects (Namespaces among them),
// then namespaced objects (each after its own Namespace and the other cluster-scoped
// objects; see applyInOrder).
type stage int

const (
	stageCRDs stage = iota
	stageClusterScoped
	stageNamespaced
)

// desiredObject is one input object, prepared for applying.
type desiredObject struct {
	// index is the object's position in the input.
	index int
	ref   ObjectRef
	// obj is the configuration to apply: the input plus the part-of label and the
	// applied-hash annotation, without server-owned metadata and status.
	obj  *unstructured.Unstructured
	body []byte
	// mapping is nil until the kind is resolved; pending is set for kinds defined
	// by a CRD of the same input that the server does not serve yet.
	mapping *meta.RESTMapping
	pending bool
	// err is set when the object cannot be applied at all.
	err error
}

func (d *desiredObject) stage() stage {
	switch {
	case d.ref.GroupKind() == crdGroupKind:
		return stageCRDs
	case d.mapping != nil && !namespaced(d.mapping):
		return stageClusterScoped
	default:
		return stageNamespaced
	}
}

// serverOwnedMetadata are metadata fields a configuration must not carry.
var serverOwnedMetadata = []string{"managedFields", "resourceVersion", "uid", "generation", "creationTimestamp",
	"selfLink", "deletionTimestamp", "deletionGracePeriodSeconds"}

// prepare copies and checks the input objects and marks them as members of set id.
// Input-level problems (missing name, duplicates, a foreign part-of label) are errors
// of the whole call: they mean the input is wrong, not the cluster. The objects are
// copied and encoded on up to workers goroutines (the encoding is most of the work).
func prepare(objs []*unstructured.Unstructured, id string, workers int) ([]*desiredObject, error) {
	errs := make([]error, len(objs))
	seen := map[objKey]int{}
	var todo []int
	for i, in := range objs {
		if in == nil {
			errs[i] = fmt.Errorf("object %d is nil", i)
			continue
		}
		ref := RefOf(in)
		if ref.Kind == "" || ref.Version == "" || ref.Name == "" {
			errs[i] = fmt.Errorf("object %d (%s): apiVersion, kind and metadata.name are required", i, ref)
			continue
		}
		if j, dup := seen[ref.key()]; dup {
			errs[i] = fmt.Errorf("%s: given twice (objects %d and %d)", ref, j, i)
			continue
		}
		seen[ref.key()] = i
		todo = append(todo, i)
	}
	prepared := make([]*desiredObject, len(objs))
	forEach(context.Background(), workers, len(todo), func(_ context.Context, k int) {
		i := todo[k]
		prepared[i], errs[i] = prepareOne(i, objs[i], id)
	})
	out := make([]*desiredObject, 0, len(objs))
	for _, d := range prepared {
		if d != nil {
			out = append(out, d)
		}
	}
	return out, errors.Join(errs...)
}

// prepareOne copies object i, drops what the server owns, marks it as a member of
// set id and encodes it.
func prepareOne(i int, in *unstructured.Unstructured, id string) (*desiredObject, error) {
	ref := RefOf(in)
	u, err := jsonCopy(in)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ref, err)
	}
	delete(u.Object, "status")
	if md, ok := u.Object["metadata"].(map[string]any); ok {
		for _, f := range serverOwnedMetadata {
			delete(md, f)
		}
	}
	if ref.GroupKind() == (schema.GroupKind{Kind: "Secret"}) {
		if err := foldStringData(u); err != nil {
			return nil, fmt.Errorf("%s: %w", ref, err)
		}
	}
	labels := u.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	if v, ok := labels[LabelPartOf]; ok && v != id {
		return nil, fmt.Errorf("%s: carries %s=%s of another ApplySet", ref, LabelPartOf, v)
	}
	labels[LabelPartOf] = id
	u.SetLabels(labels)
	d := &desiredObject{index: i, ref: ref, obj: u}
	if err := d.seal(); err != nil {
		return nil, fmt.Errorf("%s: %w", ref, err)
	}
	return d, nil
}

// seal stamps the applied-hash annotation and encodes the body. It must be called
// again after the object changes.
func (d *desiredObject) seal() error {
	ann := d.obj.GetAnnotations()
	delete(ann, AnnotationAppliedHash)
	if len(ann) == 0 {
		unstructured.RemoveNestedField(d.obj.Object, "metadata", "annotations")
	} else {
		d.obj.SetAnnotations(ann)
	}
	plain, err := json.Marshal(d.obj.Object) // encoding/json sorts map keys: canonical
	if err != nil {
		return fmt.Errorf("encoding: %w", err)
	}
	sum := sha256.Sum256(plain)
	if ann == nil {
		ann = map[string]string{}
	}
	ann[AnnotationAppliedHash] = base64.RawURLEncoding.EncodeToString(sum[:18])
	d.obj.SetAnnotations(ann)
	d.body, err = json.Marshal(d.obj.Object)
	if err != nil {
		return fmt.Errorf("encoding: %w", err)
	}
	return nil
}

// jsonCopy copies u through JSON, so that any Go values a renderer used (int, typed
// maps, …) become the JSON types (int64, float64, map[string]any, []any) that the rest
// of the package and apimachinery expect.
func jsonCopy(u *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	if c, ok := copyJSONValue(u.Object).(map[string]any); ok {
		return &unstructured.Unstructured{Object: c}, nil
	}
	b, err := json.Marshal(u.Object)
	if err != nil {
		return nil, fmt.Errorf("encoding: %w", err)
	}
	out := &unstructured.Unstructured{}
	if err := utiljson.Unmarshal(b, &out.Object); err != nil {
		return nil, fmt.Errorf("decoding: %w", err)
	}
	return out, nil
}

// copyJSONValue deep-copies v, turning the Go types renderers commonly use into JSON
// types. It returns nil (not a map) if it meets a type it does not know, and the
// caller falls back to a JSON round trip.
func copyJSONValue(v any) any {
	switch v := v.(type) {
	case nil, string, bool, int64, float64:
		return v
	case int:
		return int64(v)
	case int32:
		return int64(v)
	case float32:
		return float64(v)
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			c := copyJSONValue(e)
			if c == nil && e != nil {
				return nil
			}
			out[k] = c
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			c := copyJSONValue(e)
			if c == nil && e != nil {
				return nil
			}
			out[i] = c
		}
		return out
	case map[string]string:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[k] = e
		}
		return out
	case []string:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = e
		}
		return out
	}
	return nil
}

// foldStringData moves a Secret's stringData into data (base64), as the API server
// does on write, so that the applied configuration is what the server stores.
func foldStringData(u *unstructured.Unstructured) error {
	sd, found, err := unstructured.NestedMap(u.Object, "stringData")
	if err != nil {
		return fmt.Errorf("stringData: %w", err)
	}
	if !found {
		return nil
	}
	data, _, err := unstructured.NestedMap(u.Object, "data")
	if err != nil {
		return fmt.Errorf("data: %w", err)
	}
	if data == nil {
		data = map[string]any{}
	}
	for k, v := range sd {
		s, ok := v.(string)
		if !ok {
			return fmt.Errorf("stringData.%s is not a string", k)
		}
		data[k] = base64.StdEncoding.EncodeToString([]byte(s))
	}
	delete(u.Object, "stringData")
	return unstructured.SetNestedMap(u.Object, data, "data")
}

// definedByCRDs returns the kinds the CRDs among objs define.
func definedByCRDs(objs []*desiredObject) sets.Set[schema.GroupKind] {
	out := sets.New[schema.GroupKind]()
	for _, d := range objs {
		if d.ref.GroupKind() != crdGroupKind {
			continue
		}
		group, _, _ := unstructured.NestedString(d.obj.Object, "spec", "group")
		kind, _, _ := unstructured.NestedString(d.obj.Object, "spec", "names", "kind")
		if group != "" && kind != "" {
			out.Insert(schema.GroupKind{Group: group, Kind: kind})
		}
	}
	return out
}

// resolve finds the REST mapping of every object that has none yet. Kinds the server
// does not serve become per-object errors with a hint, unless a CRD of the same input
// defines them (then the object stays pending until the CRDs are established, or
// fails if final is set).
//
// The kinds the server serves are cached for the Manager's life; the first kind that
// is not found makes the Manager read them again (once per call), so that a
// long-running daemon sees CRDs installed after it started.
func (m *Manager) resolve(objs []*desiredObject, final bool) {
	crdKinds := definedByCRDs(objs)
	refreshed := false
	type answer struct {
		mapping *meta.RESTMapping
		err     error
	}
	known := map[schema.GroupVersionKind]answer{}
	lookup := func(ref ObjectRef) (*meta.RESTMapping, error) {
		gvk := schema.GroupVersionKind{Group: ref.Group, Version: ref.Version, Kind: ref.Kind}
		if a, ok := known[gvk]; ok {
			return a.mapping, a.err
		}
		mp, err := m.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if meta.IsNoMatchError(err) && !refreshed {
			refreshed = true
			m.mapper.Reset()
			known = map[schema.GroupVersionKind]answer{}
			mp, err = m.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		}
		known[gvk] = answer{mp, err}
		return mp, err
	}
	for _, d := range objs {
		if d.mapping != nil || d.err != nil {
			continue
		}
		mapping, err := lookup(d.ref)
		if err != nil {
			if meta.IsNoMatchError(err) && crdKinds.Has(d.ref.GroupKind()) && !final {
				d.pending = true
				continue
			}
			d.pending = false
			d.err = objectError(d.ref, "apply", m.mappingError(d.ref, err))
			continue
		}
		d.pending = false
		d.mapping = mapping
		if !namespaced(mapping) && d.ref.Namespace != "" {
			// As kubectl does: a namespace on a cluster-scoped object means nothing.
			d.ref.Namespace = ""
			d.obj.SetNamespace("")
			if err := d.seal(); err != nil {
				d.err = objectError(d.ref, "apply", err)
			}
		}
		if namespaced(mapping) && d.ref.Namespace == "" {
			d.err = objectError(d.ref, "apply", errors.New("namespaced object without metadata.namespace"))
		}
	}
}

// mappingError explains a kind the server does not serve.
func (m *Manager) mappingError(ref ObjectRef, err error) error {
	if !meta.IsNoMatchError(err) {
		return fmt.Errorf("resolving its kind: %w", err)
	}
	gv := schema.GroupVersion{Group: ref.Group, Version: ref.Version}.String()
	hint, ok := m.opts.MissingKindHints[ref.Group]
	if !ok {
		if ref.Group == "" || !isCustomGroup(ref.Group) {
			hint = "check the apiVersion against `kubectl api-versions`"
		} else {
			hint = "install the CustomResourceDefinition (or the operator) that provides it"
		}
	}
	return fmt.Errorf("the cluster does not serve kind %s in %s: %s", ref.Kind, gv, hint)
}

// isCustomGroup reports whether a group is not one of Kubernetes' own.
func isCustomGroup(group string) bool {
	for _, suffix := range []string{".k8s.io", ".kubernetes.io"} {
		if len(group) > len(suffix) && group[len(group)-len(suffix):] == suffix {
			return false
		}
	}
	switch group {
	case "apps", "batch", "autoscaling", "policy":
		return false
	}
	return true
}

// byStage groups resolved objects by stage, each group in input order.
func byStage(objs []*desiredObject) map[stage][]*desiredObject {
	out := map[stage][]*desiredObject{}
	for _, d := range objs {
		if d.err != nil || d.pending || d.mapping == nil {
			continue
		}
		out[d.stage()] = append(out[d.stage()], d)
	}
	for _, g := range out {
		sort.SliceStable(g, func(i, j int) bool { return g[i].index < g[j].index })
	}
	return out
}
