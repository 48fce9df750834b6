package render

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"

	"golang.org/x/sync/errgroup"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/pcsync/pcsync/pkg/config"
	"github.com/pcsync/pcsync/pkg/fastpath"
)

// Options tune Render. The zero value is valid.
type Options struct {
	// Concurrency is how many companies are rendered at once; 0 means
	// GOMAXPROCS. Kustomize runs are serialised whatever the value.
	Concurrency int
	// Reference takes the reference path of both of render's fast paths
	// (see package fastpath): every company, with patches or without, goes
	// through kustomize on its own with all its objects (instead of
	// fastpath_batch.go), and every object is encoded by go-yaml (instead
	// of fastpath_yaml.go), for the output and for kustomize's input. The
	// output is the same bytes either way (the tests beside each fast path
	// prove it), only slower.
	Reference fastpath.Reference
	// Cache, when set, keeps each company's objects for the next Render
	// (see Cache): a company whose inputs did not change is not rendered
	// again. Nil renders every company.
	Cache *Cache

	// perCompany runs kustomize once per company that has patches (the
	// reference for patching) and keeps the path without kustomize for
	// companies without patches; for the batched path's tests.
	perCompany bool
}

// DefaultOptions returns the options Render uses for zero fields.
func DefaultOptions() Options {
	return Options{Concurrency: runtime.GOMAXPROCS(0)}
}

// Output is the rendered manifests.
type Output struct {
	// Objects are every company's objects, sorted: Namespaces first, then
	// other cluster-scoped objects, then by namespace, kind and name.
	Objects []*unstructured.Unstructured
	// Warnings are findings that do not stop rendering, one line each.
	Warnings []string
	// Companies are the objects per company, sorted by slug.
	Companies []CompanyOutput

	// reference is Options.Reference: YAML encodes with go-yaml.
	reference fastpath.Reference
}

// CompanyOutput is one company's manifests.
type CompanyOutput struct {
	// Slug is the company's metadata.name.
	Slug string
	// Namespace is the tenant namespace.
	Namespace string
	// Objects are sorted like Output.Objects.
	Objects []*unstructured.Unstructured

	// reference is Options.Reference: YAML encodes with go-yaml.
	reference fastpath.Reference
}

// Render builds the tenant manifests of every company in m. A patch that
// kustomize cannot apply gives a *config.Errors positioned at that patch;
// other failures give a plain error.
//
// The reference for patches is kustomizeCompany: the company's objects and
// patches in a kustomize run of their own. Unless opts.Reference is set,
// companies without patches are not run through kustomize (their objects
// are the output) and the others are patched in batches (see
// fastpath_batch.go); a company whose patches a batch cannot take, and
// every company of a batch that kustomize fails on, goes through
// kustomizeCompany.
func Render(m *config.Model, opts Options) (*Output, error) {
	if opts.Concurrency <= 0 {
		opts.Concurrency = DefaultOptions().Concurrency
	}
	n := len(m.Companies)
	comps := make([]CompanyOutput, n)
	errs := make([]error, n)
	global := planGlobal(m)
	items := make([]*batchItem, n)
	bases := make([][]*unstructured.Unstructured, n)
	keys, fresh := make([][sha256.Size]byte, n), make([]bool, n)
	opts.Cache.begin(m, opts)
	forEach(n, opts, func(yw *yamlWriter, i int) {
		c := &m.Companies[i]
		t := tenant{m: m, c: c, ns: m.Namespace(c)}
		comps[i] = CompanyOutput{Slug: c.Metadata.Name, Namespace: t.ns, reference: opts.Reference}
		key, kept, hit := opts.Cache.lookup(c)
		keys[i], fresh[i] = key, !hit
		if hit {
			comps[i].Objects = kept
			return
		}
		objs := t.objects()
		own := companyPatches(c)
		patched := len(m.Settings.Spec.Patches)+len(own) > 0
		if patched {
			bases[i] = slices.Clone(objs)
		}
		switch {
		case bool(opts.Reference) || (opts.perCompany && patched):
			comps[i].Objects, errs[i] = kustomizeCompany(yw, m, c, t.ns, objs)
		case !patched:
			sortObjects(objs)
			comps[i].Objects = objs
		default:
			if items[i] = planCompany(&global, i, t.ns, objs, own); items[i] == nil {
				comps[i].Objects, errs[i] = kustomizeCompany(yw, m, c, t.ns, objs)
			}
		}
	})
	var batchable []*batchItem
	for _, it := range items {
		if it != nil {
			batchable = append(batchable, it)
		}
	}
	batches := formBatches(batchable)
	forEach(len(batches), opts, func(yw *yamlWriter, b int) {
		batch := batches[b]
		outs, redo, ok := runBatch(&global, batch, yw)
		for bi, it := range batch {
			if ok && !redo[bi] {
				comps[it.index].Objects = outs[bi]
				continue
			}
			comps[it.index].Objects, errs[it.index] = kustomizeCompany(yw, m, &m.Companies[it.index], it.ns, it.objs)
		}
	})
	// The tenant baseline guard (guard.go), on every patched company.
	guardWarnings := make([][]config.Warning, n)
	forEach(n, opts, func(yw *yamlWriter, i int) {
		if bases[i] == nil || errs[i] != nil {
			return
		}
		c := &m.Companies[i]
		guardWarnings[i], errs[i] = guardCompany(yw, m, c, tenant{m: m, c: c, ns: comps[i].Namespace}, bases[i], comps[i].Objects)
	})

	if err := joinErrors(errs); err != nil {
		return nil, err
	}
	opts.Cache.end(m, keys, fresh, comps, guardWarnings)
	return newOutput(m, comps, guardWarnings, opts.Reference), nil
}

// joinErrors returns the companies' config errors as one, or the first
// other error.
func joinErrors(errs []error) error {
	var cfgErrs config.Errors
	for _, err := range errs {
		var ce *config.Errors
		switch {
		case err == nil:
		case errors.As(err, &ce):
			cfgErrs.List = append(cfgErrs.List, ce.List...)
		default:
			return err
		}
	}
	if len(cfgErrs.List) > 0 {
		return &cfgErrs
	}
	return nil
}

// newOutput gathers the companies' objects, sorted, and the warnings of the
// config and of the baseline guard.
func newOutput(m *config.Model, comps []CompanyOutput, guardWarnings [][]config.Warning, reference fastpath.Reference) *Output {
	out := &Output{Companies: comps, reference: reference}
	total := 0
	for _, c := range comps {
		total += len(c.Objects)
	}
	out.Objects = make([]*unstructured.Unstructured, 0, total)
	for _, c := range comps {
		out.Objects = append(out.Objects, c.Objects...)
	}
	sortObjects(out.Objects)
	for _, w := range m.Warnings {
		out.Warnings = append(out.Warnings, warningLine(w))
	}
	for _, ws := range guardWarnings {
		for _, w := range ws {
			out.Warnings = append(out.Warnings, warningLine(w))
		}
	}
	return out
}

// forEach calls fn for 0..n-1 on up to opts.Concurrency goroutines at
// once. Each call gets a yamlWriter that no other running call holds;
// writers are handed from one call to the next, so that what a writer
// remembers of go-yaml's answers serves many companies.
func forEach(n int, opts Options, fn func(yw *yamlWriter, i int)) {
	var g errgroup.Group
	g.SetLimit(opts.Concurrency)
	// At most Concurrency calls run at once, so no more writers are made
	// and a returned one always finds room.
	free := make(chan *yamlWriter, opts.Concurrency)
	for i := range n {
		g.Go(func() error {
			var yw *yamlWriter
			select {
			case yw = <-free:
			default:
				yw = newYAMLWriter(opts.Reference)
			}
			fn(yw, i)
			free <- yw
			return nil
		})
	}
	_ = g.Wait() // fn reports errors in its own slots; none comes back here
}

// companyPatches are a company's own patches.
func companyPatches(c *config.Company) []patchRef {
	var out []patchRef
	for i, p := range c.Spec.Patches {
		out = append(out, patchRef{patch: p, field: fmt.Sprintf("spec.patches[%d]", i), index: i})
	}
	return out
}

// kustomizeCompany is the reference path: the company's objects and
// patches (Settings' first) in a kustomize run of their own. The objects
// come back sorted.
func kustomizeCompany(yw *yamlWriter, m *config.Model, c *config.Company, ns string, objs []*unstructured.Unstructured) ([]*unstructured.Unstructured, error) {
	patches := allPatches(m, c)
	patched, err := kustomize(yw, ns, objs, patches)
	if err != nil {
		return nil, patchError(yw, c.Metadata.Name, ns, objs, patches, err)
	}
	sortObjects(patched)
	return patched, nil
}

// sortObjects orders objects: Namespaces first, then other cluster-scoped
// objects, then by namespace, kind, name and API group.
func sortObjects(objs []*unstructured.Unstructured) {
	type keyed struct {
		rank                       int
		ns, kind, name, apiVersion string
		o                          *unstructured.Unstructured
	}
	ks := make([]keyed, len(objs))
	for i, o := range objs {
		k := keyed{ns: o.GetNamespace(), kind: o.GetKind(), name: o.GetName(), apiVersion: o.GetAPIVersion(), o: o, rank: 2}
		switch {
		case k.kind == "Namespace" && k.ns == "":
			k.rank = 0
		case k.ns == "":
			k.rank = 1
		}
		ks[i] = k
	}
	slices.SortStableFunc(ks, func(a, b keyed) int {
		return cmp.Or(
			cmp.Compare(a.rank, b.rank),
			cmp.Compare(a.ns, b.ns),
			cmp.Compare(a.kind, b.kind),
			cmp.Compare(a.name, b.name),
			cmp.Compare(a.apiVersion, b.apiVersion),
		)
	})
	for i := range ks {
		objs[i] = ks[i].o
	}
}

// YAML is every object as one YAML stream, documents separated by "---",
// keys sorted.
func (o *Output) YAML() ([]byte, error) { return encodeYAML(o.Objects, o.reference) }

// JSON is every object in one List (apiVersion v1, kind List, items), as
// kubectl get -o json prints several objects: indented by four spaces, keys
// sorted, ending with a newline.
func (o *Output) JSON() ([]byte, error) {
	items := make([]map[string]any, len(o.Objects))
	for i, u := range o.Objects {
		items[i] = u.Object
	}
	b, err := json.MarshalIndent(map[string]any{"apiVersion": "v1", "kind": "List", "items": items}, "", "    ")
	if err != nil {
		return nil, fmt.Errorf("render: JSON: %w", err)
	}
	return append(b, '\n'), nil
}

// YAML is the company's objects as one YAML stream.
func (c *CompanyOutput) YAML() ([]byte, error) { return encodeYAML(c.Objects, c.reference) }

// encodeYAML encodes objects as one stream, with go-yaml when reference
// is set. The emitter is the slowest part of rendering, so large outputs
// are encoded in parallel chunks and joined in order.
func encodeYAML(objs []*unstructured.Unstructured, reference fastpath.Reference) ([]byte, error) {
	workers := min(runtime.GOMAXPROCS(0), max(len(objs)/64, 1))
	chunks := make([][]byte, workers)
	errs := make([]error, workers)
	per := (len(objs) + workers - 1) / workers
	var wg sync.WaitGroup
	for w := range workers {
		lo, hi := min(w*per, len(objs)), min((w+1)*per, len(objs))
		wg.Go(func() {
			yw := newYAMLWriter(reference)
			var b []byte
			for i := lo; i < hi; i++ {
				o := objs[i]
				if i > 0 {
					b = append(b, "---\n"...)
				}
				var err error
				if b, err = yw.appendObject(b, o.Object); err != nil {
					errs[w] = fmt.Errorf("render: encode %s %s/%s: %w", o.GetKind(), o.GetNamespace(), o.GetName(), err)
					return
				}
			}
			chunks[w] = b
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return bytes.Join(chunks, nil), nil
}

// warningLine formats a warning as path:line:col: warning: field: message.
func warningLine(w config.Warning) string {
	s := w.Pos.String() + ": warning: "
	if w.Field != "" {
		s += w.Field + ": "
	}
	return s + w.Message
}

func itoa(n int) string { return fmt.Sprint(n) }

// oneLine keeps a message on one line.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
