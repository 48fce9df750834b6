package render

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/pcsync/pcsync/pkg/config"
	"github.com/pcsync/pcsync/pkg/config/configtest"
)

// TestCacheRendersWhatChanged: with a Cache, a Render renders only the
// companies whose inputs changed, keeps the others' very objects, and
// gives the bytes a Render without a cache gives; a change that all
// companies share renders them all, and a company gone is forgotten.
func TestCacheRendersWhatChanged(t *testing.T) {
	dir := t.TempDir()
	if err := configtest.WriteFleet(dir, configtest.FleetOptions{Companies: 6}); err != nil {
		t.Fatal(err)
	}
	m, err := config.Load(context.Background(), dir, config.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cache := NewCache()
	steps := []struct {
		name         string
		change       func(m *config.Model)
		wantRendered int
		wantKept     []bool // company i's objects are the last Render's
	}{
		{name: "first render", change: func(*config.Model) {}, wantRendered: 6},
		{name: "nothing changed", change: func(*config.Model) {}, wantRendered: 0, wantKept: []bool{true, true, true, true, true, true}},
		{name: "one company's label", change: func(m *config.Model) {
			m.Companies[2].Metadata.Labels = map[string]string{"team": "blue"}
		}, wantRendered: 1, wantKept: []bool{true, true, false, true, true, true}},
		{name: "one company's patch", change: func(m *config.Model) {
			m.Companies[4].Spec.Patches = []config.Patch{{Patch: "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: paperclip-tenant-sa\n  annotations: {a: b}\n"}}
		}, wantRendered: 1, wantKept: []bool{true, true, true, true, false, true}},
		{name: "the Settings", change: func(m *config.Model) {
			m.Settings.Spec.Patches = []config.Patch{{Patch: "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: paperclip-tenant-sa\n  annotations: {c: d}\n"}}
		}, wantRendered: 6, wantKept: make([]bool, 6)},
		{name: "the images' defaults", change: func(m *config.Model) { m.Images.Tag = "v9" }, wantRendered: 6, wantKept: make([]bool, 6)},
		{name: "a company gone", change: func(m *config.Model) {
			m.Companies = slices.Delete(m.Companies, 0, 1)
		}, wantRendered: 0, wantKept: []bool{true, true, true, true, true}},
	}
	var last map[string]*unstructured.Unstructured
	for _, st := range steps {
		st.change(m)
		before := cache.rendered
		out, err := Render(m, Options{Cache: cache})
		if err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		if got := cache.rendered - before; got != st.wantRendered {
			t.Errorf("%s: %d companies rendered, want %d", st.name, got, st.wantRendered)
		}
		if st.wantKept != nil {
			kept := make([]bool, len(out.Companies))
			for i, c := range out.Companies {
				kept[i] = last[c.Slug] == c.Objects[0]
			}
			if diff := cmp.Diff(st.wantKept, kept); diff != "" {
				t.Errorf("%s: objects kept from the last Render (-want +got):\n%s", st.name, diff)
			}
		}
		if len(cache.entries) != len(m.Companies) {
			t.Errorf("%s: the cache holds %d companies, want %d", st.name, len(cache.entries), len(m.Companies))
		}
		requireSameBytes(t, st.name, m, out)
		last = map[string]*unstructured.Unstructured{}
		for _, c := range out.Companies {
			last[c.Slug] = c.Objects[0]
		}
	}
}

// TestCacheRandomPatches renders random mixes of patches, changed in a few
// companies (and now and then in Settings) from one Render to the next,
// with one Cache throughout, and requires the bytes (or the error) of a
// Render without a cache.
func TestCacheRandomPatches(t *testing.T) {
	m := loadRandomFleet(t)
	r := rand.New(rand.NewPCG(7, 8))
	cache := NewCache()
	n := 100
	if testing.Short() {
		n = 30
	}
	for iter := range n {
		if iter == 0 || r.IntN(6) == 0 {
			m.Settings.Spec.Patches = nil
			acme, _ := m.Company("acme")
			for range r.IntN(2) {
				m.Settings.Spec.Patches = append(m.Settings.Spec.Patches, instantiate(patchPool[r.IntN(len(patchPool))], "acme", m.Namespace(acme)))
			}
		}
		for i := range m.Companies {
			if c := &m.Companies[i]; iter == 0 || r.IntN(4) == 0 {
				c.Spec.Patches = nil
				for range r.IntN(3) {
					c.Spec.Patches = append(c.Spec.Patches, instantiate(patchPool[r.IntN(len(patchPool))], c.Metadata.Name, m.Namespace(c)))
				}
			}
		}
		cached, cerr := renderBytes(t, m, Options{Cache: cache})
		fresh, ferr := renderBytes(t, m, Options{})
		if cerr != ferr {
			t.Fatalf("iteration %d: error with the cache %q, without %q\n%s", iter, cerr, ferr, describePatches(m))
		}
		if diff := cmp.Diff(fresh, cached); diff != "" {
			t.Fatalf("iteration %d: render with the cache differs (-without +with):\n%s\n%s", iter, diff, describePatches(m))
		}
	}
}

// requireSameBytes fails the test when out's YAML is not that of a Render
// of m without a cache.
func requireSameBytes(t *testing.T, step string, m *config.Model, out *Output) {
	t.Helper()
	got, err := out.YAML()
	if err != nil {
		t.Fatal(err)
	}
	want, werr := renderBytes(t, m, Options{})
	if werr != "" {
		t.Fatalf("%s: %s", step, werr)
	}
	if diff := cmp.Diff(want, string(got)); diff != "" {
		t.Errorf("%s: render with the cache differs (-without +with):\n%s", step, diff)
	}
}
