package render

import (
	"bytes"
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/pcsync/pcsync/pkg/config"
)

// kustomizeMu serialises kustomize runs: kyaml keeps global state (its
// OpenAPI schema cache) that is not safe for concurrent use. It is the one
// place that guards kustomize (runKustomize takes it); everything else in
// Render, the encoding of kustomize's input and the reading of its output
// included, runs in parallel.
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
// ones, built by krusty on an in-memory file system. This is the
// reference for how pcsync applies patches; the batched path
// (fastpath_batch.go) must give the same objects.
//
// The namespaced objects go in without their namespace and the
// kustomization sets it, as in an overlay with `namespace:`: patches are
// applied before the namespace is, so a patch written once in Settings
// (which cannot know each tenant's namespace) matches every tenant.
func kustomize(yw *yamlWriter, ns string, objs []*unstructured.Unstructured, patches []patchRef) ([]*unstructured.Unstructured, error) {
	res, err := encodeResources(yw, objs, true)
	if err != nil {
		return nil, err
	}
	kps := make([]types.Patch, len(patches))
	for i, p := range patches {
		kps[i] = kustomizePatch(p.patch)
	}
	return runKustomize(res, ns, kps)
}

// encodeResources writes objects as one YAML stream for kustomize.
func encodeResources(yw *yamlWriter, objs []*unstructured.Unstructured, stripNamespace bool) ([]byte, error) {
	var res bytes.Buffer
	var b []byte
	for _, o := range objs {
		obj := o.Object
		if stripNamespace && o.GetNamespace() != "" {
			c := o.DeepCopy()
			c.SetNamespace("")
			obj = c.Object
		}
		var err error
		if b, err = yw.appendObject(b[:0], obj); err != nil {
			return nil, fmt.Errorf("kustomize: encode %s %s: %w", o.GetKind(), o.GetName(), err)
		}
		res.WriteString("---\n")
		res.Write(b)
	}
	return res.Bytes(), nil
}

// runKustomize builds a kustomization of the resources res (a YAML
// stream), with namespace ns when not empty, and patches, and returns the
// resulting objects.
func runKustomize(res []byte, ns string, patches []types.Patch) ([]*unstructured.Unstructured, error) {
	k := types.Kustomization{
		TypeMeta:  types.TypeMeta{APIVersion: types.KustomizationVersion, Kind: types.KustomizationKind},
		Namespace: ns,
		Patches:   patches,
	}
	if len(res) > 0 {
		k.Resources = []string{"resources.yaml"}
	}
	kb, err := yaml.Marshal(k)
	if err != nil {
		return nil, fmt.Errorf("kustomize: encode kustomization: %w", err)
	}
	fs := filesys.MakeFsInMemory()
	if err := fs.WriteFile("/tenant/resources.yaml", res); err != nil {
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
		out = append(out, &unstructured.Unstructured{Object: jsonTypes(m).(map[string]any)})
	}
	return out, nil
}

// jsonTypes gives integers the type int64, as in the objects Render builds
// and in what a JSON decoder for unstructured objects gives (kustomize's
// YAML decoder gives int, which unstructured's DeepCopy does not take).
func jsonTypes(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = jsonTypes(e)
		}
	case []any:
		for i, e := range x {
			x[i] = jsonTypes(e)
		}
	case int:
		return int64(x)
	}
	return v
}

func kustomizePatch(p config.Patch) types.Patch {
	kp := types.Patch{Patch: p.Patch}
	if p.Target != nil {
		sel := targetSelector(p.Target)
		kp.Target = &sel
	}
	if o := p.Options; o != nil {
		kp.Options = &types.PatchArgs{AllowNameChange: o.AllowNameChange, AllowKindChange: o.AllowKindChange}
	}
	return kp
}

// patchError finds which patch makes kustomize fail, by applying them one
// more at a time, and positions the error at that patch.
func patchError(yw *yamlWriter, slug, ns string, objs []*unstructured.Unstructured, patches []patchRef, err error) error {
	for i := range patches {
		if _, e := kustomize(yw, ns, objs, patches[:i+1]); e != nil {
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
