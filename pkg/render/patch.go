package render

import (
	"bytes"
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/kustomize/kyaml/resid"
	"sigs.k8s.io/yaml"

	"github.com/pcsync/pcsync/pkg/config"
)

// kustomizeMu serialises kustomize runs: kyaml keeps global state (its
// OpenAPI schema cache) that is not safe for concurrent use. It is the one
// place that guards kustomize; everything else in Render runs in parallel.
var kustomizeMu sync.Mutex

// patchRef is a patch with where it came from, for errors.
type patchRef struct {
	patch config.Patch
	// field is the patch's field path in its document.
	field string
	// index is the patch's place in its document's spec.patches.
	index int
}

// kustomize applies patches to objs the way `kustomize build` does: objs
// become the resources of a kustomization whose patches are the given
// ones, built by krusty on an in-memory file system.
//
// The namespaced objects go in without their namespace and the
// kustomization sets it, as in an overlay with `namespace:`: patches are
// applied before the namespace is, so a patch written once in Settings
// (which cannot know each tenant's namespace) matches every tenant.
func kustomize(ns string, objs []*unstructured.Unstructured, patches []patchRef) ([]*unstructured.Unstructured, error) {
	var res bytes.Buffer
	for _, o := range objs {
		obj := o.Object
		if o.GetNamespace() != "" {
			c := o.DeepCopy()
			c.SetNamespace("")
			obj = c.Object
		}
		b, err := marshalObject(obj)
		if err != nil {
			return nil, fmt.Errorf("kustomize: encode %s %s: %w", o.GetKind(), o.GetName(), err)
		}
		res.WriteString("---\n")
		res.Write(b)
	}
	k := types.Kustomization{
		TypeMeta:  types.TypeMeta{APIVersion: types.KustomizationVersion, Kind: types.KustomizationKind},
		Resources: []string{"resources.yaml"},
		Namespace: ns,
	}
	for _, p := range patches {
		k.Patches = append(k.Patches, kustomizePatch(p.patch))
	}
	kb, err := yaml.Marshal(k)
	if err != nil {
		return nil, fmt.Errorf("kustomize: encode kustomization: %w", err)
	}
	fs := filesys.MakeFsInMemory()
	if err := fs.WriteFile("/tenant/resources.yaml", res.Bytes()); err != nil {
		return nil, fmt.Errorf("kustomize: %w", err)
	}
	if err := fs.WriteFile("/tenant/kustomization.yaml", kb); err != nil {
		return nil, fmt.Errorf("kustomize: %w", err)
	}
	kustomizeMu.Lock()
	rm, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(fs, "/tenant")
	kustomizeMu.Unlock()
	if err != nil {
		return nil, err
	}
	out := make([]*unstructured.Unstructured, 0, rm.Size())
	for _, r := range rm.Resources() {
		m, err := r.Map()
		if err != nil {
			return nil, fmt.Errorf("kustomize: read result %s: %w", r.CurId(), err)
		}
		out = append(out, &unstructured.Unstructured{Object: m})
	}
	return out, nil
}

func kustomizePatch(p config.Patch) types.Patch {
	kp := types.Patch{Patch: p.Patch}
	if t := p.Target; t != nil {
		kp.Target = &types.Selector{
			ResId: resid.ResId{
				Gvk:       resid.Gvk{Group: t.Group, Version: t.Version, Kind: t.Kind},
				Name:      t.Name,
				Namespace: t.Namespace,
			},
			LabelSelector:      t.LabelSelector,
			AnnotationSelector: t.AnnotationSelector,
		}
	}
	if o := p.Options; o != nil {
		kp.Options = &types.PatchArgs{AllowNameChange: o.AllowNameChange, AllowKindChange: o.AllowKindChange}
	}
	return kp
}

// patchError finds which patch makes kustomize fail, by applying them one
// more at a time, and positions the error at that patch.
func patchError(slug, ns string, objs []*unstructured.Unstructured, patches []patchRef, err error) error {
	for i := range patches {
		if _, e := kustomize(ns, objs, patches[:i+1]); e != nil {
			p := patches[i]
			return &config.Errors{List: []*config.Error{{
				Pos:     p.patch.Source,
				Field:   p.field,
				Message: fmt.Sprintf("company %q: patch %d: %s", slug, p.index, oneLine(e.Error())),
			}}}
		}
	}
	return fmt.Errorf("company %q: kustomize: %w", slug, err)
}
