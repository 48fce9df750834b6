package render

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pcsync/pcsync/internal/testing/golden"
	"github.com/pcsync/pcsync/pkg/config"
	"github.com/pcsync/pcsync/pkg/config/configtest"
)

// corpusCase is one config of the corpus that render's fast paths are
// checked on against their reference.
type corpusCase struct {
	name string
	m    *config.Model
}

// referenceCorpus loads the configs that render's fast paths are checked
// on: every golden case (testdata/render), every refused patch
// (testdata/badpatches, which render refuses), examples/config, and
// configtest fleets in both egress modes, each also with a Settings patch
// and with a patch of its own in every company.
func referenceCorpus(t *testing.T) []corpusCase {
	t.Helper()
	var out []corpusCase
	load := func(name, dir string) *config.Model {
		m, err := config.Load(context.Background(), dir, config.LoadOptions{})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return m
	}
	for _, root := range []string{"../../testdata/render", "../../testdata/badpatches"} {
		for _, dir := range golden.Dirs(t, root) {
			name := filepath.Base(root) + "/" + filepath.Base(dir)
			out = append(out, corpusCase{name, load(name, filepath.Join(dir, "config"))})
		}
	}
	out = append(out, corpusCase{"examples/config", load("examples/config", "../../examples/config")})
	settingsPatch := config.Patch{Patch: "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: paperclip-tenant-sa\n  annotations:\n    example.com/team: agents\n"}
	for _, cilium := range []bool{false, true} {
		dir := t.TempDir()
		if err := configtest.WriteFleet(dir, configtest.FleetOptions{Companies: 30, Cilium: cilium}); err != nil {
			t.Fatal(err)
		}
		name := fmt.Sprintf("fleet-cilium=%t", cilium)
		out = append(out, corpusCase{name, load(name, dir)})
		m := load(name, dir)
		m.Settings.Spec.Patches = []config.Patch{settingsPatch}
		out = append(out, corpusCase{name + "-settings-patch", m})
		m = load(name, dir)
		for i := range m.Companies {
			c := &m.Companies[i]
			c.Spec.Patches = []config.Patch{{
				Target: &config.PatchTarget{Kind: "ResourceQuota"},
				Patch:  fmt.Sprintf("- op: replace\n  path: /spec/hard/pods\n  value: \"%d\"\n", 1+i%9),
			}}
		}
		out = append(out, corpusCase{name + "-company-patches", m})
	}
	return out
}

// renderedCompany is what the equivalence tests compare of one company.
type renderedCompany struct {
	Slug, Namespace string
	Objects         []map[string]any
}

// rendered is what the equivalence tests compare of a render: each
// company's objects, all objects in order, the warnings, or the error.
type rendered struct {
	Companies []renderedCompany
	Objects   []map[string]any
	Warnings  []string
	Err       string
}

func renderFor(m *config.Model, opts Options) rendered {
	out, err := Render(m, opts)
	if err != nil {
		return rendered{Err: err.Error()}
	}
	r := rendered{Warnings: out.Warnings}
	for _, o := range out.Objects {
		r.Objects = append(r.Objects, o.Object)
	}
	for _, c := range out.Companies {
		rc := renderedCompany{Slug: c.Slug, Namespace: c.Namespace}
		for _, o := range c.Objects {
			rc.Objects = append(rc.Objects, o.Object)
		}
		r.Companies = append(r.Companies, rc)
	}
	return r
}

// TestBatchedMatchesReference is the equivalence test of
// fastpath_batch.go: every config of the corpus rendered on the fast
// path (no kustomize without patches, batched runs) and on the reference
// path (Options.Reference: one kustomize run per company with all its
// objects) must give the same objects, warnings and errors.
func TestBatchedMatchesReference(t *testing.T) {
	for _, c := range referenceCorpus(t) {
		t.Run(c.name, func(t *testing.T) {
			fast := renderFor(c.m, Options{})
			ref := renderFor(c.m, Options{Reference: true})
			if diff := cmp.Diff(ref, fast); diff != "" {
				t.Errorf("fast path differs from the reference (-reference +fast):\n%s", diff)
			}
		})
	}
}

// renderBytes renders m and returns the YAML stream, or the error.
func renderBytes(t *testing.T, m *config.Model, opts Options) (string, string) {
	t.Helper()
	out, err := Render(m, opts)
	if err != nil {
		return "", err.Error()
	}
	y, err := out.YAML()
	if err != nil {
		t.Fatal(err)
	}
	return string(y), ""
}

// TestBatchedMatchesPerCompany renders every golden case with patches in
// batches (the default) and company by company (the reference path:
// one kustomize run per company, as an overlay with namespace:), and
// requires the same bytes.
func TestBatchedMatchesPerCompany(t *testing.T) {
	golden.Cases(t, "../../testdata/render", func(t *testing.T, dir string) {
		m, err := config.Load(context.Background(), filepath.Join(dir, "config"), config.LoadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		batched, berr := renderBytes(t, m, Options{})
		ref, rerr := renderBytes(t, m, Options{perCompany: true})
		if berr != rerr {
			t.Fatalf("batched error %q, per-company error %q", berr, rerr)
		}
		if diff := cmp.Diff(ref, batched); diff != "" {
			t.Errorf("batched render differs from per-company (-per-company +batched):\n%s", diff)
		}
	})
}

// TestBatchPlan checks which companies of the patch cases take the
// batched path, so that the equivalence above covers it.
func TestBatchPlan(t *testing.T) {
	want := map[string][]string{
		"patches":          {"stark", "wayne"},
		"patches-scoped":   {"acme", "globex", "initech", "tenant-sa"},
		"patches-fallback": {"default-subject"}, // batched, then redone: see TestDefaultSubjectRedone
	}
	for name, batched := range want {
		m, err := config.Load(context.Background(), filepath.Join("../../testdata/render", name, "config"), config.LoadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		global := planGlobal(m)
		if !global.ok {
			t.Fatalf("%s: Settings patches not batchable", name)
		}
		var got []string
		for i := range m.Companies {
			c := &m.Companies[i]
			ns := m.Namespace(c)
			if planCompany(&global, i, ns, tenant{m: m, c: c, ns: ns}.objects(), companyPatches(c)) != nil {
				got = append(got, c.Metadata.Name)
			}
		}
		slices.Sort(got)
		if diff := cmp.Diff(batched, got); diff != "" {
			t.Errorf("%s: batched companies (-want +got):\n%s", name, diff)
		}
	}
}

// TestDefaultSubjectRedone checks that a batch whose result has a
// RoleBinding subject named default asks for the reference path.
func TestDefaultSubjectRedone(t *testing.T) {
	m, err := config.Load(context.Background(), "../../testdata/render/patches-fallback/config", config.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	global := planGlobal(m)
	c, _ := m.Company("default-subject")
	ns := m.Namespace(c)
	it := planCompany(&global, 0, ns, tenant{m: m, c: c, ns: ns}.objects(), companyPatches(c))
	if it == nil {
		t.Fatal("not batchable")
	}
	_, redo, ok := runBatch(&global, []*batchItem{it}, newYAMLWriter(false))
	if !ok || !redo[0] {
		t.Errorf("runBatch: ok=%t redo=%v, want ok and a redo", ok, redo)
	}
}

// The companies of the random test: their namespaces collide with object
// names (paperclip-tenant-sa, paperclip-quota), so that patches selecting
// by name alone are tested against cluster-scoped objects too.
const randomFleet = `apiVersion: pcsync.io/v1alpha1
kind: Company
metadata:
  name: acme
spec:
  id: acme-1
  serviceAccountAnnotations:
    eks.amazonaws.com/role-arn: arn:aws:iam::1:role/acme
  agents:
    - name: coder
      adapter: claude_local
---
apiVersion: pcsync.io/v1alpha1
kind: Company
metadata:
  name: tenant-sa
  labels:
    team: blue
spec:
  id: tenant-sa-1
  sessions:
    size: 1Gi
---
apiVersion: pcsync.io/v1alpha1
kind: Company
metadata:
  name: quota
spec:
  id: quota-1
  egress:
    allowCidrs: ["10.0.0.0/8"]
    allowPrivateCidrs: true
---
apiVersion: pcsync.io/v1alpha1
kind: Company
metadata:
  name: globex
spec:
  id: globex-1
  egress:
    mode: cilium
    allowFqdns: [example.com]
`

// patchPool are patches of every kind the batched path treats apart:
// with and without target, JSON and strategic-merge, on namespaced and
// cluster-scoped objects, selecting by label (also by labels that earlier
// patches set), failing ones, and ones that need the reference path.
// {ns} and {slug} are the company's namespace and slug (for Settings
// patches: acme's).
var patchPool = []config.Patch{
	{Patch: "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: paperclip-tenant-sa\n  annotations:\n    p/sa: \"{slug}\"\n"},
	{Patch: "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {ns}\n  annotations:\n    p/ns: named\n"},
	{Target: &config.PatchTarget{Kind: "Namespace"}, Patch: "- op: add\n  path: /metadata/labels/p~1ns-kind\n  value: \"{slug}\"\n"},
	{Target: &config.PatchTarget{Name: "paperclip-tenant-sa"}, Patch: "- op: add\n  path: /metadata/labels/p~1by-name\n  value: \"{slug}\"\n"},
	{Target: &config.PatchTarget{Name: "paperclip-quota"}, Patch: "- op: add\n  path: /metadata/labels/p~1quota-name\n  value: \"{slug}\"\n"},
	{Target: &config.PatchTarget{Kind: "ResourceQuota"}, Patch: "- op: replace\n  path: /spec/hard/pods\n  value: \"7\"\n"},
	{Target: &config.PatchTarget{LabelSelector: "app.kubernetes.io/managed-by=pcsync"}, Patch: "apiVersion: v1\nkind: Any\nmetadata:\n  name: any\n  annotations:\n    p/all: \"{slug}\"\n"},
	{Target: &config.PatchTarget{Group: "networking.k8s.io", Kind: "NetworkPolicy", Name: "paperclip-egress-.*"}, Patch: "- op: add\n  path: /metadata/labels/p~1egress\n  value: \"{slug}\"\n"},
	{Target: &config.PatchTarget{Kind: "Role"}, Patch: "- op: add\n  path: /metadata/labels/stage\n  value: two\n"},
	{Target: &config.PatchTarget{LabelSelector: "stage=two"}, Patch: "apiVersion: v1\nkind: Any\nmetadata:\n  name: any\n  annotations:\n    p/stage: \"{slug}\"\n"},
	{Target: &config.PatchTarget{LabelSelector: "paperclip.io/company={slug}"}, Patch: "- op: add\n  path: /metadata/labels/p~1mine\n  value: \"{slug}\"\n"},
	{Target: &config.PatchTarget{AnnotationSelector: "eks.amazonaws.com/role-arn"}, Patch: "- op: add\n  path: /metadata/labels/p~1irsa\n  value: \"yes\"\n"},
	{Target: &config.PatchTarget{Kind: "Namespace", Name: "paperclip-.*"}, Patch: "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: whatever\n  labels:\n    p/ns-smp: \"{slug}\"\n"},
	{Target: &config.PatchTarget{Kind: "LimitRange"}, Patch: "- op: replace\n  path: /spec/nothing/here\n  value: 1\n"},
	{Patch: "apiVersion: v2\nkind: ServiceAccount\nmetadata:\n  name: paperclip-tenant-sa\n"},
	{Patch: "apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata:\n  name: paperclip-tenant-rb\nsubjects:\n  - kind: ServiceAccount\n    name: default\n"},
	{Target: &config.PatchTarget{Kind: "Role", Namespace: "default"}, Patch: "- op: add\n  path: /metadata/labels/p~1default-ns\n  value: \"yes\"\n"},
	{Target: &config.PatchTarget{Kind: "PersistentVolumeClaim"}, Patch: "- op: replace\n  path: /metadata/name\n  value: renamed\n"},
	{Target: &config.PatchTarget{Kind: "ServiceAccount"}, Options: &config.PatchOptions{AllowNameChange: true}, Patch: "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: agents\n"},
	{Patch: "apiVersion: v1\nkind: LimitRange\nmetadata:\n  name: paperclip-limits\n$patch: delete\n"},
	{Target: &config.PatchTarget{Kind: "NetworkPolicy"}, Patch: "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata:\n  name: x\nspec:\n  policyTypes: [Egress]\n"},
	{Target: &config.PatchTarget{Kind: "Role"}, Patch: "- op: copy\n  from: /metadata/namespace\n  path: /metadata/labels/p~1ns\n"},
	{Patch: "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: paperclip-tenant-sa\n  namespace: default\n  labels:\n    p/smp-ns: \"yes\"\n"},
	{Patch: "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: paperclip-tenant-sa\n  namespace: other\n"},
	{Patch: "apiVersion: v1\nkind: ResourceQuota\nmetadata:\n  name: paperclip-quota\nspec:\n  $patch: replace\n  hard:\n    pods: \"3\"\n"},
	{Patch: "apiVersion: cilium.io/v2\nkind: CiliumNetworkPolicy\nmetadata:\n  name: paperclip-egress-fqdn\n  labels:\n    p/cnp: \"{slug}\"\n"},
}

func instantiate(p config.Patch, slug, ns string) config.Patch {
	p.Patch = strings.NewReplacer("{slug}", slug, "{ns}", ns).Replace(p.Patch)
	if p.Target != nil {
		t := *p.Target
		t.LabelSelector = strings.ReplaceAll(t.LabelSelector, "{slug}", slug)
		p.Target = &t
	}
	return p
}

// TestBatchedRandomPatches renders random mixes of patches, in Settings
// and per company, in batches and company by company, and requires the
// same bytes, or the same error.
func TestBatchedRandomPatches(t *testing.T) {
	m := loadRandomFleet(t)
	r := rand.New(rand.NewPCG(5, 6))
	n := 150
	if testing.Short() {
		n = 40
	}
	batchedRuns := 0
	for iter := range n {
		m.Settings.Spec.Patches = nil
		acme, _ := m.Company("acme")
		for range r.IntN(3) {
			m.Settings.Spec.Patches = append(m.Settings.Spec.Patches, instantiate(patchPool[r.IntN(len(patchPool))], "acme", m.Namespace(acme)))
		}
		for i := range m.Companies {
			c := &m.Companies[i]
			c.Spec.Patches = nil
			for range r.IntN(4) {
				c.Spec.Patches = append(c.Spec.Patches, instantiate(patchPool[r.IntN(len(patchPool))], c.Metadata.Name, m.Namespace(c)))
			}
		}
		if g := planGlobal(m); g.ok {
			for i := range m.Companies {
				c := &m.Companies[i]
				ns := m.Namespace(c)
				if planCompany(&g, i, ns, tenant{m: m, c: c, ns: ns}.objects(), companyPatches(c)) != nil {
					batchedRuns++
				}
			}
		}
		batched, berr := renderBytes(t, m, Options{})
		ref, rerr := renderBytes(t, m, Options{perCompany: true})
		if berr != rerr {
			t.Fatalf("iteration %d: batched error %q, per-company error %q\n%s", iter, berr, rerr, describePatches(m))
		}
		if diff := cmp.Diff(ref, batched); diff != "" {
			t.Fatalf("iteration %d: batched render differs from per-company (-per-company +batched):\n%s\n%s", iter, diff, describePatches(m))
		}
	}
	if batchedRuns < n {
		t.Errorf("only %d companies took the batched path in %d iterations", batchedRuns, n)
	}
}

// loadRandomFleet loads randomFleet, whose companies' unsafe patches are
// allowed: many of patchPool's break the tenant baseline (renames,
// deletions, the deny-all policy), and the outputs must compare.
func loadRandomFleet(t *testing.T) *config.Model {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "companies.yaml"), []byte(randomFleet), 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := config.Load(context.Background(), dir, config.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	m.Settings.Spec.AllowUnsafePatches = []config.UnsafePatch{config.UnsafePodSecurity, config.UnsafeNetworkPolicy, config.UnsafeRBAC, config.UnsafeObjectIdentity}
	return m
}

func describePatches(m *config.Model) string {
	var b strings.Builder
	for _, p := range m.Settings.Spec.Patches {
		fmt.Fprintf(&b, "Settings: target=%+v patch=%q\n", p.Target, p.Patch)
	}
	for _, c := range m.Companies {
		for _, p := range c.Spec.Patches {
			fmt.Fprintf(&b, "%s: target=%+v patch=%q\n", c.Metadata.Name, p.Target, p.Patch)
		}
	}
	return b.String()
}
