package render

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	yaml3 "go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/resid"

	"github.com/pcsync/pcsync/pkg/config"
)

// Fast path: batched kustomize runs (see package fastpath).
//
// Stands in for: kustomizeCompany (render.go, patch.go), one krusty run per
// company with all its objects, their namespaces removed, as the resources
// of a kustomization with `namespace: <tenant namespace>` and the Settings
// patches and then the company's as its patches: what an overlay does.
//
// Measured win: a krusty run costs about 1.5 ms of CPU before it reads a
// single object, and each object it reads, patches and hands back another
// 0.3-0.5 ms, so 1,000 companies with one Settings patch took ~10 s of CPU
// on the reference path. BenchmarkRenderPatched at 1,000 companies: 9.2 s of
// CPU, 16.3M allocations, 1.8 GB before; 1.26 s, 2.05M, 287 MB after, the
// YAML writer (fastpath_yaml.go) included (docs/render.md, "Figures",
// GOMAXPROCS=1; commit ed03b67). The benchmarks in bench_test.go run each
// fleet on both paths (path=fast, path=reference); on 2026-11-25, 1,000
// companies, CPU per render at GOMAXPROCS=1: 6.46 s on the reference path,
// 0.26 s on the fast one without patches (16.7M and 256k allocations);
// 6.75 s and 0.95 s with a Settings patch (18.2M and 2.1M allocations),
// the YAML writer included in both.
//
// Equivalence test: fastpath_batch_test.go: TestBatchedMatchesReference (every
// golden case, the repository's configs and configtest fleets, with and
// without a Settings patch, rendered fast and with Options.Reference),
// TestBatchedMatchesPerCompany (every golden case, batched and per company)
// and TestBatchedRandomPatches (random mixes of the patches below, in
// Settings and per company); each requires the same bytes or the same error.
//
// Reference switch: Options.Reference sends every company through
// kustomizeCompany.
//
// How it works. A company without patches (none in Settings, none of its
// own) skips kustomize: its objects are the output, as kustomize would give
// them back unchanged (Render). The batched path gives the others the same
// objects with a fraction of the work:
//
//   - Only candidates go through kustomize: objects that some patch's
//     target (or, for a strategic-merge patch without target, its apiVersion,
//     kind and name) can select by group, version, kind, name and namespace.
//     A patch changes only what it selects, and kustomize gives any other
//     object back as it got it, so the others skip it.
//   - The candidates of several companies share one krusty run, with their
//     namespaces in place, as JSON. A Settings patch is one entry for the
//     whole batch: it selects in every company what it would select in
//     each. A company's patch is scoped to its company: a target gets
//     `namespace: <tenant namespace>` for the namespaced objects and, for
//     each cluster-scoped object of the company it could select (the
//     Namespace), an entry naming that object; a strategic-merge patch
//     without target gets a target naming the one object it patches. The
//     Settings patches come first, then each company's, so every company
//     sees its patches in the reference's order. Label and annotation
//     selectors are left to kustomize, as patches may change labels.
//
// This is equivalent to the reference only when no patch can see or change
// what differs between the two runs: an object's namespace (absent during
// the reference's patches, set by its namespace transformer afterwards) or
// any object's identity (kustomize rewrites references to renamed objects
// in other objects). So a company goes through the reference path instead
// when any of its patches (Settings' included)
//
//   - has a target with a namespace, or options that allow a name or kind
//     change;
//   - is a JSON patch with an operation on "", /apiVersion, /kind,
//     /metadata, /metadata/name or /metadata/namespace (or under them);
//   - is a strategic-merge patch that is not exactly one document with
//     apiVersion, kind and metadata.name, that sets metadata.namespace,
//     has a "$" directive at its top or in its metadata, or is a List;
//   - without a target, does not select exactly one of the company's objects;
//   - cannot be read at all (kustomize then reports the error as before);
//
// or when the result holds a RoleBinding subject named "default" (the
// reference's namespace transformer gives it the tenant namespace). When a
// Settings patch is one of these, every company with patches takes the
// reference path. A batch that kustomize fails on is rendered company by
// company on the reference path, which gives the same results and errors
// as before.

// Batch limits: kustomize rebuilds its whole resource list, checking every
// id against every other, after each strategic-merge patch entry, so the
// cost of a run grows with the square of its objects times its entries.
const (
	maxBatchObjects = 64
	maxBatchEntries = 48
)

// patchSpec is what the batched path needs to know about a patch.
type patchSpec struct {
	ref patchRef
	// named is a strategic-merge patch without target: it patches the one
	// object of its group, version, kind and name.
	named bool
	gvk   resid.Gvk
	name  string
}

// specPatch reads a patch for the batched path; false when the patch
// must go through the reference path (see the list above).
func specPatch(r patchRef) (patchSpec, bool) {
	p := r.patch
	s := patchSpec{ref: r}
	if o := p.Options; o != nil && (o.AllowNameChange || o.AllowKindChange) {
		return s, false
	}
	if p.Target != nil && p.Target.Namespace != "" {
		return s, false
	}
	doc, ok := singleYAMLDocument(strings.TrimSpace(p.Patch))
	if !ok {
		return s, false
	}
	switch doc.Kind {
	case yaml3.SequenceNode:
		// A JSON 6902 patch: a list of operations; it needs a target.
		if p.Target == nil {
			return s, false
		}
		for _, op := range doc.Content {
			if op.Kind != yaml3.MappingNode {
				return s, false
			}
			for _, field := range []string{"path", "from"} {
				v := mappingValue(op, field)
				if v == nil {
					continue
				}
				if v.Kind != yaml3.ScalarNode || v.ShortTag() != "!!str" || touchesIdentity(v.Value) {
					return s, false
				}
			}
		}
		return s, true
	case yaml3.MappingNode:
		// A strategic-merge patch.
		for i := 0; i+1 < len(doc.Content); i += 2 {
			if strings.HasPrefix(doc.Content[i].Value, "$") {
				return s, false
			}
		}
		api, kind := scalarValue(doc, "apiVersion"), scalarValue(doc, "kind")
		md := mappingValue(doc, "metadata")
		if api == "" || kind == "" || strings.HasSuffix(kind, "List") || md == nil || md.Kind != yaml3.MappingNode {
			return s, false
		}
		for i := 0; i+1 < len(md.Content); i += 2 {
			if k := md.Content[i].Value; k == "namespace" || strings.HasPrefix(k, "$") {
				return s, false
			}
		}
		name := scalarValue(md, "name")
		if name == "" {
			return s, false
		}
		if p.Target == nil {
			g, v := resid.ParseGroupVersion(api)
			s.named, s.gvk, s.name = true, resid.Gvk{Group: g, Version: v, Kind: kind}, name
		}
		return s, true
	}
	return s, false
}

// singleYAMLDocument parses text that must hold exactly one YAML document.
func singleYAMLDocument(text string) (*yaml3.Node, bool) {
	dec := yaml3.NewDecoder(strings.NewReader(text))
	var doc yaml3.Node
	if err := dec.Decode(&doc); err != nil || len(doc.Content) != 1 {
		return nil, false
	}
	var more yaml3.Node
	if err := dec.Decode(&more); err == nil {
		return nil, false
	}
	return doc.Content[0], true
}

func mappingValue(m *yaml3.Node, key string) *yaml3.Node {
	if m.Kind != yaml3.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

func scalarValue(m *yaml3.Node, key string) string {
	if v := mappingValue(m, key); v != nil && v.Kind == yaml3.ScalarNode && v.ShortTag() == "!!str" {
		return v.Value
	}
	return ""
}

// touchesIdentity reports whether a JSON pointer reaches an object's
// apiVersion, kind, name or namespace, or contains them.
func touchesIdentity(ptr string) bool {
	if !strings.HasPrefix(ptr, "/") {
		return true
	}
	segs := strings.Split(ptr[1:], "/")
	for i, s := range segs {
		segs[i] = strings.ReplaceAll(strings.ReplaceAll(s, "~1", "/"), "~0", "~")
	}
	switch segs[0] {
	case "apiVersion", "kind":
		return true
	case "metadata":
		return len(segs) == 1 || segs[1] == "name" || segs[1] == "namespace"
	}
	return false
}

// objID is what selects an object: its group, version, kind, name and
// namespace ("" for a cluster-scoped object).
type objID struct {
	gvk       resid.Gvk
	name, ns  string
	clustered bool
}

func idOf(o *unstructured.Unstructured) objID {
	g, v := resid.ParseGroupVersion(o.GetAPIVersion())
	ns := o.GetNamespace()
	return objID{gvk: resid.Gvk{Group: g, Version: v, Kind: o.GetKind()}, name: o.GetName(), ns: ns, clustered: ns == ""}
}

// selector is a kustomize patch target with its compiled regular
// expressions.
type selector struct {
	sel types.Selector
	re  *types.SelectorRegex
}

func newSelector(sel types.Selector) (selector, error) {
	re, err := types.NewSelectorRegex(&sel)
	return selector{sel: sel, re: re}, err
}

// mayMatch reports whether kustomize's Select can pick the object: the
// parts of a selector that patches cannot change (namespace, name, group,
// version, kind) match. Label and annotation selectors are left out: a
// patch may change labels, so they are decided in the run.
func (s selector) mayMatch(id objID) bool {
	ns := id.ns
	if id.clustered {
		ns = resid.TotallyNotANamespace
	}
	return s.re.MatchNamespace(ns) && s.re.MatchName(id.name) && s.re.MatchGvk(id.gvk)
}

func targetSelector(t *config.PatchTarget) types.Selector {
	if t == nil {
		return types.Selector{}
	}
	return types.Selector{
		ResId: resid.ResId{
			Gvk:       resid.Gvk{Group: t.Group, Version: t.Version, Kind: t.Kind},
			Name:      t.Name,
			Namespace: t.Namespace,
		},
		LabelSelector:      t.LabelSelector,
		AnnotationSelector: t.AnnotationSelector,
	}
}

// exactSelector selects the objects of exactly this group (any, when
// empty, as kustomize reads an empty field), version, kind and name.
func exactSelector(gvk resid.Gvk, name string) types.Selector {
	return types.Selector{ResId: resid.ResId{
		Gvk:  resid.Gvk{Group: regexp.QuoteMeta(gvk.Group), Version: regexp.QuoteMeta(gvk.Version), Kind: regexp.QuoteMeta(gvk.Kind)},
		Name: regexp.QuoteMeta(name),
	}}
}

// batchEntry is one patches entry of a batched kustomization.
type batchEntry struct {
	spec patchSpec
	sel  selector
}

func (e batchEntry) patch() types.Patch {
	kp := kustomizePatch(e.spec.ref.patch)
	sel := e.sel.sel
	kp.Target = &sel
	return kp
}

// globalPlan is the Settings patches as batch entries.
type globalPlan struct {
	entries []batchEntry
	ok      bool
}

// planGlobal reads the Settings patches; the plan is not ok when one of
// them needs the reference path.
func planGlobal(m *config.Model) globalPlan {
	var g globalPlan
	for i, p := range m.Settings.Spec.Patches {
		s, ok := specPatch(patchRef{patch: p, field: fmt.Sprintf("spec.patches[%d]", i), index: i})
		if !ok {
			return globalPlan{}
		}
		sel := targetSelector(p.Target)
		if s.named {
			sel = exactSelector(s.gvk, s.name)
		}
		cs, err := newSelector(sel)
		if err != nil {
			// kustomize reports the bad pattern on the reference path.
			return globalPlan{}
		}
		g.entries = append(g.entries, batchEntry{spec: s, sel: cs})
	}
	g.ok = true
	return g
}

// batchItem is one company's part of a batched run.
type batchItem struct {
	index int
	ns    string
	objs  []*unstructured.Unstructured
	ids   []objID
	// candidate marks the objects that go through kustomize.
	candidate []bool
	// entries are the company's own patches, scoped to it.
	entries []batchEntry
}

// planCompany prepares a company for the batched path; nil when it must
// go through the reference path.
func planCompany(g *globalPlan, index int, ns string, objs []*unstructured.Unstructured, own []patchRef) *batchItem {
	if !g.ok {
		return nil
	}
	it := &batchItem{index: index, ns: ns, objs: objs, ids: make([]objID, len(objs)), candidate: make([]bool, len(objs))}
	for i, o := range objs {
		it.ids[i] = idOf(o)
	}
	mark := func(s selector) {
		for i, id := range it.ids {
			if !it.candidate[i] && s.mayMatch(id) {
				it.candidate[i] = true
			}
		}
	}
	// The Settings patches: a named one must select exactly the one object
	// that kustomize's lookup by id finds.
	for _, e := range g.entries {
		if e.spec.named && !it.selectsOnlyNamed(e.spec, e.sel) {
			return nil
		}
		mark(e.sel)
	}
	nsRe := regexp.QuoteMeta(ns)
	clusterRe := regexp.QuoteMeta(resid.TotallyNotANamespace)
	for _, r := range own {
		s, ok := specPatch(r)
		if !ok {
			return nil
		}
		var sels []types.Selector
		if s.named {
			sel := exactSelector(s.gvk, s.name)
			id, ok := it.named(s)
			if !ok {
				return nil
			}
			sel.Namespace = nsRe
			if id.clustered {
				sel.Namespace = clusterRe
			}
			sels = append(sels, sel)
		} else {
			base := targetSelector(r.patch.Target)
			all, err := newSelector(base)
			if err != nil {
				return nil
			}
			namespaced := base
			namespaced.Namespace = nsRe
			sels = append(sels, namespaced)
			for _, id := range it.ids {
				if id.clustered && all.mayMatch(id) {
					one := base
					one.Name = regexp.QuoteMeta(id.name)
					one.Namespace = clusterRe
					sels = append(sels, one)
				}
			}
		}
		for _, sel := range sels {
			cs, err := newSelector(sel)
			if err != nil {
				return nil
			}
			if s.named && !it.selectsOnlyNamed(s, cs) {
				return nil
			}
			it.entries = append(it.entries, batchEntry{spec: s, sel: cs})
			mark(cs)
		}
	}
	return it
}

// named finds the one object that kustomize's lookup by id finds for a
// strategic-merge patch without target: the same group, version, kind
// and name (in the reference run, where no object has a namespace yet).
func (it *batchItem) named(s patchSpec) (objID, bool) {
	var found objID
	n := 0
	for _, id := range it.ids {
		if id.gvk.Equals(s.gvk) && id.name == s.name {
			found = id
			n++
		}
	}
	return found, n == 1
}

// selectsOnlyNamed reports whether sel selects, among the company's
// objects, only the object that a named patch patches.
func (it *batchItem) selectsOnlyNamed(s patchSpec, sel selector) bool {
	want, ok := it.named(s)
	if !ok {
		return false
	}
	for _, id := range it.ids {
		if sel.mayMatch(id) != (id == want) {
			return false
		}
	}
	return true
}

func (it *batchItem) candidates() int {
	n := 0
	for _, c := range it.candidate {
		if c {
			n++
		}
	}
	return n
}

// formBatches groups the items, in order, into batches within the limits.
func formBatches(items []*batchItem) [][]*batchItem {
	var out [][]*batchItem
	var cur []*batchItem
	objs, entries := 0, 0
	for _, it := range items {
		n, e := it.candidates(), len(it.entries)
		if len(cur) > 0 && (objs+n > maxBatchObjects || entries+e > maxBatchEntries) {
			out = append(out, cur)
			cur, objs, entries = nil, 0, 0
		}
		cur = append(cur, it)
		objs += n
		entries += e
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}

// runBatch patches the candidates of a batch of companies in one krusty
// run and returns each company's objects, sorted, in the order of batch;
// ok is false when the batch must be rendered company by company on the
// reference path instead (kustomize failed, or a result needs it).
func runBatch(g *globalPlan, batch []*batchItem, yw *yamlWriter) (outs [][]*unstructured.Unstructured, redo []bool, ok bool) {
	type ref struct{ item, obj int }
	var res []byte
	where := map[objKey]ref{}
	for bi, it := range batch {
		for i, o := range it.objs {
			if !it.candidate[i] {
				continue
			}
			// JSON, which is YAML whose strings are all quoted: kyaml then
			// skips, for every string it sets while merging a patch, a
			// check whether YAML 1.1 would read it as another type (a
			// question for quoting the output, which is not used here).
			b, err := json.Marshal(o.Object)
			if err != nil {
				return nil, nil, false
			}
			res = append(res, "---\n"...)
			res = append(res, b...)
			res = append(res, '\n')
			where[keyOf(o)] = ref{bi, i}
		}
	}
	var patches []types.Patch
	for _, e := range g.entries {
		patches = append(patches, e.patch())
	}
	for _, it := range batch {
		for _, e := range it.entries {
			patches = append(patches, e.patch())
		}
	}
	patched, err := runKustomize(res, "", patches)
	if err != nil {
		return nil, nil, false
	}
	outs = make([][]*unstructured.Unstructured, len(batch))
	for bi, it := range batch {
		for i, o := range it.objs {
			if !it.candidate[i] {
				outs[bi] = append(outs[bi], o)
			}
		}
	}
	redo = make([]bool, len(batch))
	for _, o := range patched {
		r, found := where[keyOf(o)]
		if !found {
			// Patches cannot rename here; anything unexpected goes the
			// reference way.
			return nil, nil, false
		}
		outs[r.item] = append(outs[r.item], o)
		if hasDefaultSubject(o) {
			redo[r.item] = true
		}
	}
	for bi := range outs {
		sortObjects(outs[bi])
	}
	return outs, redo, true
}

// objKey identifies an object in a batch.
type objKey struct{ apiVersion, kind, ns, name string }

func keyOf(o *unstructured.Unstructured) objKey {
	return objKey{o.GetAPIVersion(), o.GetKind(), o.GetNamespace(), o.GetName()}
}

// hasDefaultSubject reports whether o is a (Cluster)RoleBinding with a
// subject named "default", which the reference's namespace transformer
// gives the tenant namespace.
func hasDefaultSubject(o *unstructured.Unstructured) bool {
	if k := o.GetKind(); k != "RoleBinding" && k != "ClusterRoleBinding" {
		return false
	}
	subjects, _ := o.Object["subjects"].([]any)
	for _, s := range subjects {
		if m, ok := s.(map[string]any); ok && m["name"] == "default" {
			return true
		}
	}
	return false
}
