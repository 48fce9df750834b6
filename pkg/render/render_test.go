package render_test

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pcsync/pcsync/internal/testing/golden"
	"github.com/pcsync/pcsync/pkg/config"
	"github.com/pcsync/pcsync/pkg/render"
)

// update rewrites the golden files: go test ./pkg/render -update
var update = flag.Bool("update", false, "rewrite the golden files under testdata/render")

const goldenRoot = "../../testdata/render"

// TestGolden renders each testdata/render/<case>/config and compares the
// manifests with want.yaml (and their JSON with them: checkJSON), the
// warnings with warnings.txt and the agents' effective settings with
// effective.txt.
func TestGolden(t *testing.T) {
	golden.Cases(t, goldenRoot, func(t *testing.T, dir string) {
		m, err := config.Load(context.Background(), filepath.Join(dir, "config"), config.LoadOptions{})
		if err != nil {
			t.Fatalf("load: %v", err)
		}
		out, err := render.Render(m, render.Options{})
		if err != nil {
			t.Fatalf("render: %v", err)
		}
		got, err := out.YAML()
		if err != nil {
			t.Fatal(err)
		}
		check(t, filepath.Join(dir, "want.yaml"), got)
		checkJSON(t, out)
		var warnings strings.Builder
		for _, w := range out.Warnings {
			warnings.WriteString(strings.ReplaceAll(w, dir+string(filepath.Separator), "") + "\n")
		}
		check(t, filepath.Join(dir, "warnings.txt"), []byte(warnings.String()))
		check(t, filepath.Join(dir, "effective.txt"), effective(m))

		// The fast paths (see package fastpath) must give the bytes of
		// the reference: every company through kustomize on its own,
		// every object encoded by go-yaml.
		ref, err := render.Render(m, render.Options{Reference: true})
		if err != nil {
			t.Fatalf("render on the reference path: %v", err)
		}
		rb, err := ref.YAML()
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(string(got), string(rb)); diff != "" {
			t.Errorf("fast render differs from the reference (-fast +reference):\n%s", diff)
		}
		// Deterministic: the same model gives the same bytes.
		again, err := render.Render(m, render.Options{Concurrency: 1})
		if err != nil {
			t.Fatal(err)
		}
		ab, _ := again.YAML()
		if !bytes.Equal(got, ab) {
			t.Errorf("second render differs from the first")
		}
	})
}

// effective lists the settings the runs loop takes from the model for
// each agent, so that defaults, the registry override and adapter
// overrides show in a golden file.
func effective(m *config.Model) []byte {
	var b strings.Builder
	for i := range m.Companies {
		c := &m.Companies[i]
		j := m.Jobs(c)
		fmt.Fprintf(&b, "company %s: namespace=%s egress=%s runtimeClassName=%q pullSecrets=%v jobs={ttl:%d deadline:%d retain:%t emptyDirSizeLimit:%s}\n",
			c.Metadata.Name, m.Namespace(c), m.EgressMode(c), c.Spec.RuntimeClassName, m.ImagePullSecrets(c),
			*j.TTLSecondsAfterFinished, *j.ActiveDeadlineSeconds, *j.Retain, *j.EmptyDirSizeLimit)
		for k := range c.Spec.Agents {
			a := &c.Spec.Agents[k]
			ad := m.Adapter(a.Adapter)
			r := m.AgentResources(a)
			fmt.Fprintf(&b, "  agent %s: adapter=%s image=%s command=%v envKeys=%v allowFqdns=%v requests={%s %s} limits={%s %s}\n",
				a.Name, a.Adapter, m.AgentImage(a), ad.Command, ad.EnvKeys, ad.AllowFQDNs,
				*r.Requests.CPU, *r.Requests.Memory, *r.Limits.CPU, *r.Limits.Memory)
		}
	}
	return []byte(b.String())
}

func check(t *testing.T, path string, got []byte) {
	t.Helper()
	golden.File(t, path, got, *update)
}

// TestBadPatch checks that a patch kustomize cannot apply is a positioned
// config error naming the company and the patch.
func TestBadPatch(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "acme.yaml"), `apiVersion: pcsync.io/v1alpha1
kind: Company
metadata:
  name: acme
spec:
  id: acme-1
  patches:
    - patch: |
        apiVersion: v1
        kind: ServiceAccount
        metadata:
          name: paperclip-tenant-sa
    - target:
        kind: ResourceQuota
      patch: |
        - op: replace
          path: /spec/nothing/here
          value: 1
`)
	m, err := config.Load(context.Background(), dir, config.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = render.Render(m, render.Options{})
	var ce *config.Errors
	if !errors.As(err, &ce) {
		t.Fatalf("got %v, want *config.Errors", err)
	}
	if len(ce.List) != 1 {
		t.Fatalf("got %d errors, want 1: %v", len(ce.List), err)
	}
	e := ce.List[0]
	wantPrefix := filepath.Join(dir, "acme.yaml") + ":13:7: spec.patches[1]: company \"acme\": patch 1: "
	if !strings.HasPrefix(e.Error(), wantPrefix) {
		t.Errorf("error = %q, want prefix %q", e.Error(), wantPrefix)
	}
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
