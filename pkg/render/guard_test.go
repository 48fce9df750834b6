package render

import (
	"context"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

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
	cases, err := os.ReadDir(badPatchRoot)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		t.Run(c.Name(), func(t *testing.T) {
			dir := filepath.Join(badPatchRoot, c.Name())
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
			goldenFile(t, filepath.Join(dir, "errors.txt"), lines[0])
			goldenFile(t, filepath.Join(dir, "warnings.txt"), b.String())
		})
	}
}

func goldenFile(t *testing.T, path, got string) {
	t.Helper()
	if updating() {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./pkg/render -run TestBadPatches -update to create it)", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s differs (-want +got):\n%s", path, diff)
	}
}

// TestBaselineHolds checks that the objects pcsync builds keep every
// invariant the guard checks, for every golden case: the guard then
// refuses only what patches change.
func TestBaselineHolds(t *testing.T) {
	for _, root := range []string{"../../testdata/render", badPatchRoot} {
		cases, err := os.ReadDir(root)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cases {
			m, err := config.Load(context.Background(), filepath.Join(root, c.Name(), "config"), config.LoadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for i := range m.Companies {
				co := &m.Companies[i]
				tn := tenant{m: m, c: co, ns: m.Namespace(co)}
				base := tn.objects()
				if vs := tn.checkBaseline(base, base); len(vs) > 0 {
					t.Errorf("%s/%s: base objects break the baseline: %v", c.Name(), co.Metadata.Name, vs)
				}
			}
		}
	}
}
