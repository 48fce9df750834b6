package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/pcsync/pcsync/internal/testing/testkustomize"
	"github.com/pcsync/pcsync/pkg/images"
)

// options are release's flags.
type options struct {
	// Version is the release, which must be images.Version.
	Version string
	// Registry is host[:port][/org] of the release's images.
	Registry string
	// Out is the directory written; Root the repository's.
	Out, Root string
}

// unsetRegistry is charts/pcsync/values.yaml's image.registry line, which
// the release's chart sets.
const unsetRegistry = "\n  registry: \"\"\n"

// write writes the release's install.yaml and chart into o.Out.
func write(o options) error {
	switch {
	case o.Registry == "":
		return errors.New("no registry: -registry (make release REGISTRY=host[:port]/org)")
	case o.Version != images.Version:
		return fmt.Errorf("version %s, but pkg/images/version.go says %s: raise it (with CHANGELOG.md and charts/pcsync/Chart.yaml) first", o.Version, images.Version)
	}
	registry := strings.TrimSuffix(o.Registry, "/")
	install, err := installYAML(filepath.Join(o.Root, "deploy", "base"), registry, o.Version)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(o.Out, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(o.Out, "install.yaml"), install, 0o644); err != nil {
		return err
	}
	chart := filepath.Join(o.Out, "chart")
	if err := os.RemoveAll(chart); err != nil {
		return err
	}
	return copyChart(filepath.Join(o.Root, "charts", "pcsync"), filepath.Join(chart, "pcsync"), registry)
}

// installYAML builds the kustomization base, as `kustomize build` does, in
// an overlay that pins pcsync's image to registry and version.
func installYAML(base, registry, version string) ([]byte, error) {
	fsys := filesys.MakeFsInMemory()
	if err := testkustomize.CopyDir(fsys, base, "/base"); err != nil {
		return nil, err
	}
	overlay, err := yaml.Marshal(map[string]any{
		"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
		"resources": []string{"../base"},
		"images":    []map[string]string{{"name": images.Pcsync, "newName": registry + "/" + images.Pcsync, "newTag": version}},
	})
	if err != nil {
		return nil, err
	}
	if err := fsys.WriteFile("/release/kustomization.yaml", overlay); err != nil {
		return nil, err
	}
	rm, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(fsys, "/release")
	if err != nil {
		return nil, fmt.Errorf("kustomize build %s: %w", base, err)
	}
	objs, err := rm.AsYaml()
	if err != nil {
		return nil, fmt.Errorf("kustomize build %s: %w", base, err)
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "# pcsync %s: deploy/base with pcsync's image %s/%s:%s.\n", version, registry, images.Pcsync, version)
	fmt.Fprintf(&b, "# kubectl apply --server-side -f install.yaml, then point git-sync at your\n")
	fmt.Fprintf(&b, "# config repository (docs/how-to/install.md).\n")
	b.Write(objs)
	return b.Bytes(), nil
}

// copyChart copies the chart in from to to, its values.yaml's
// image.registry set to registry.
func copyChart(from, to, registry string) error {
	if err := os.CopyFS(to, os.DirFS(from)); err != nil {
		return fmt.Errorf("copy %s: %w", from, err)
	}
	values := filepath.Join(to, "values.yaml")
	data, err := os.ReadFile(values)
	if err != nil {
		return err
	}
	if n := bytes.Count(data, []byte(unsetRegistry)); n != 1 {
		return fmt.Errorf("%s: %d lines %q, want 1 (the release sets image.registry there)",
			filepath.Join(from, "values.yaml"), n, strings.TrimSpace(unsetRegistry))
	}
	data = bytes.Replace(data, []byte(unsetRegistry), []byte(fmt.Sprintf("\n  registry: %s\n", registry)), 1)
	return os.WriteFile(values, data, 0o644)
}
