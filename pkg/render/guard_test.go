package render

import (
	"context"
	"errors"
	"flag"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pcsync/pcsync/internal/testing/golden"
	"github.com/pcsync/pcsync/pkg/config"
)

// updating reports whether -update (defined by render_test.go) is set.
func updating() bool {
	f := flag.Lookup("update")
	return f != nil && f.Value.String() == "true"
}

const badPatchRoot = "../../testdata/badpatches"

// TestBadPatches renders each testdata/badpatches/<case>/config, whose
// patches break the tenant baseline, and requires exactly the errors of
// errors.txt (file:line:col of the patch, field, message) and the
// warnings of warnings.txt, on the batched path and on the per-company
// reference path alike. -update rewrites both files.
func TestBadPatches(t *testing.T) {
	golden.Cases(t, badPatchRoot, func(t *testing.T, dir string) {
		prefix := dir + string(filepath.Separator)
		m, err := config.Load(context.Background(), filepath.Join(dir, "config"), config.LoadOptions{})
		if err != nil {
			t.Fatalf("load: %v", err)
		}
		var lines [2]string
		for i, opts := range []Options{{}, {perCompany: true}} {
			_, err := Render(m, opts)
			var ce *config.Errors
			if !errors.As(err, &ce) {
				t.Fatalf("Render(%+v) = %v, want *config.Errors", opts, err)
			}
			var b strings.Builder
			for _, e := range ce.List {
				b.WriteString(strings.TrimPrefix(e.Error(), prefix) + "\n")
			}
			lines[i] = b.String()
		}
		if diff := cmp.Diff(lines[1], lines[0]); diff != "" {
			t.Errorf("batched errors differ from per-company (-per-company +batched):\n%s", diff)
		}
		// The warnings: the config's, then those of each company that
		// is not refused, rendered on its own.
		var b strings.Builder
		for _, w := range m.Warnings {
			b.WriteString(strings.TrimPrefix(w.String(), prefix) + "\n")
		}
		for _, co := range m.Companies {
			one := *m
			one.Companies, one.Warnings = []config.Company{co}, nil
			if out, err := Render(&one, Options{}); err == nil {
				for _, w := range out.Warnings {
					b.WriteString(strings.TrimPrefix(w, prefix) + "\n")
				}
			}
		}
		golden.File(t, filepath.Join(dir, "errors.txt"), []byte(lines[0]), updating())
		golden.File(t, filepath.Join(dir, "warnings.txt"), []byte(b.String()), updating())
	})
}

// TestBaselineHolds checks that the objects pcsync builds keep every
// invariant the guard checks, for every golden case: the guard then
// refuses only what patches change.
func TestBaselineHolds(t *testing.T) {
	for _, root := range []string{"../../testdata/render", badPatchRoot} {
		for _, dir := range golden.Dirs(t, root) {
			m, err := config.Load(context.Background(), filepath.Join(dir, "config"), config.LoadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for i := range m.Companies {
				co := &m.Companies[i]
				tn := tenant{m: m, c: co, ns: m.Namespace(co)}
				base := tn.objects()
				if vs := tn.checkBaseline(base, base); len(vs) > 0 {
					t.Errorf("%s/%s: base objects break the baseline: %v", filepath.Base(dir), co.Metadata.Name, vs)
				}
			}
		}
	}
}
