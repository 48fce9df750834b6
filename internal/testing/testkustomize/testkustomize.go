package testkustomize

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// Build builds the kustomization in dir of fsys and returns its objects in
// the order kustomize gives them, their values those of JSON (what
// unstructured's DeepCopy takes; kustomize's own maps hold YAML's int).
func Build(fsys filesys.FileSystem, dir string) ([]*unstructured.Unstructured, error) {
	rm, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("kustomize build %s: %w", dir, err)
	}
	y, err := rm.AsYaml()
	if err != nil {
		return nil, fmt.Errorf("kustomize build %s: %w", dir, err)
	}
	objs, err := Decode(y)
	if err != nil {
		return nil, fmt.Errorf("kustomize build %s: %w", dir, err)
	}
	return objs, nil
}

// Decode returns the objects of a stream of YAML (or JSON) documents, in
// its order, their values those of JSON; empty documents are left out
// (helm template's output decodes so too).
func Decode(y []byte) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(y), 4096)
	var out []*unstructured.Unstructured
	for {
		var m map[string]any
		if err := dec.Decode(&m); errors.Is(err, io.EOF) {
			return out, nil
		} else if err != nil {
			return nil, err
		}
		if m != nil {
			out = append(out, &unstructured.Unstructured{Object: m})
		}
	}
}

// BuildDir builds the kustomization in dir on disk.
func BuildDir(dir string) ([]*unstructured.Unstructured, error) {
	return Build(filesys.MakeFsOnDisk(), dir)
}

// CopyDir copies the files of directory from on disk, and of its
// subdirectories, into dir to of fsys (a kustomization's base beside an
// overlay written in memory).
func CopyDir(fsys filesys.FileSystem, from, to string) error {
	err := filepath.WalkDir(from, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(from, path)
		if err != nil {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return fsys.WriteFile(filepath.Join(to, rel), data)
	})
	if err != nil {
		return fmt.Errorf("copy %s: %w", from, err)
	}
	return nil
}

// WriteYAML writes each of files into dir of fsys, by its file name: a
// string or []byte as it is, any other value as YAML.
func WriteYAML(fsys filesys.FileSystem, dir string, files map[string]any) error {
	for _, name := range slices.Sorted(maps.Keys(files)) {
		var data []byte
		switch v := files[name].(type) {
		case string:
			data = []byte(v)
		case []byte:
			data = v
		default:
			b, err := yaml.Marshal(v)
			if err != nil {
				return fmt.Errorf("%s: %w", filepath.Join(dir, name), err)
			}
			data = b
		}
		if err := fsys.WriteFile(filepath.Join(dir, name), data); err != nil {
			return fmt.Errorf("%s: %w", filepath.Join(dir, name), err)
		}
	}
	return nil
}

// Find is the object of objs of kind and name; nil when there is none.
func Find(objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	return nil
}
