package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/pcsync/pcsync/internal/testing/testkustomize"
	"github.com/pcsync/pcsync/pkg/images"
)

// TestWrite writes a release's manifests (what make release does after it
// pushed the images): install.yaml holds deploy/base's objects with every
// image of pcsync's pinned to the registry and the release version, and
// every other image to a release of its own (a tag, never latest); the
// chart's values name the registry. A version other than pkg/images' or
// no registry writes nothing.
func TestWrite(t *testing.T) {
	for _, tc := range []struct {
		name     string
		o        options
		wantErr  string
		registry string
	}{
		{name: "release", o: options{Version: images.Version, Registry: "ghcr.io/acme/"}, registry: "ghcr.io/acme"},
		{name: "registry with a port", o: options{Version: images.Version, Registry: "127.0.0.1:5000/pcsync"}, registry: "127.0.0.1:5000/pcsync"},
		{name: "another version", o: options{Version: "v9.9.9", Registry: "ghcr.io/acme"}, wantErr: "pkg/images/version.go says " + images.Version},
		{name: "no registry", o: options{Version: images.Version}, wantErr: "no registry"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.o.Root, tc.o.Out = "../..", filepath.Join(t.TempDir(), "release")
			err := write(tc.o)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("write: %v, want an error saying %q", err, tc.wantErr)
				}
				if _, err := os.Stat(tc.o.Out); !os.IsNotExist(err) {
					t.Errorf("%s was written: %v", tc.o.Out, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			checkInstall(t, filepath.Join(tc.o.Out, "install.yaml"), tc.registry)
			values, err := os.ReadFile(filepath.Join(tc.o.Out, "chart", "pcsync", "values.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(values), "\n  registry: "+tc.registry+"\n") {
				t.Errorf("the release's chart/pcsync/values.yaml does not set image.registry to %s", tc.registry)
			}
			for _, f := range []string{"Chart.yaml", "templates/deployment.yaml", "templates/rbac.yaml"} {
				if _, err := os.Stat(filepath.Join(tc.o.Out, "chart", "pcsync", f)); err != nil {
					t.Errorf("the release's chart: %v", err)
				}
			}
		})
	}
}

// checkInstall checks install.yaml's objects against deploy/base's and its
// images.
func checkInstall(t *testing.T, path, registry string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := testkustomize.Decode(data)
	if err != nil {
		t.Fatalf("install.yaml: %v", err)
	}
	base, err := testkustomize.BuildDir("../../deploy/base")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(keys(base), keys(objs)); diff != "" {
		t.Errorf("install.yaml's objects against deploy/base's (-base +install.yaml):\n%s", diff)
	}
	catalog := map[string]bool{}
	for _, s := range images.All() {
		catalog[s.Name] = true
	}
	var ours []string
	for _, img := range containerImages(objs) {
		reg, name, tag := images.Split(img)
		switch {
		case catalog[name] && reg == registry && tag == images.Version:
			ours = append(ours, img)
		case catalog[name]:
			t.Errorf("install.yaml runs %s, want %s", img, images.Ref(registry, name, images.Version))
		case tag == "" || tag == "latest":
			t.Errorf("install.yaml runs %s, which is not pinned to a release", img)
		}
	}
	if diff := cmp.Diff([]string{images.Ref(registry, images.Pcsync, images.Version)}, ours); diff != "" {
		t.Errorf("pcsync's images in install.yaml (-want +got):\n%s", diff)
	}
}

// keys are the objects' kinds, namespaces and names, in their order.
func keys(objs []*unstructured.Unstructured) []string {
	var out []string
	for _, o := range objs {
		out = append(out, o.GetKind()+" "+o.GetNamespace()+"/"+o.GetName())
	}
	return out
}

// containerImages are the images of every container and init container of
// the objects' pod templates.
func containerImages(objs []*unstructured.Unstructured) []string {
	var out []string
	for _, o := range objs {
		for _, field := range []string{"containers", "initContainers"} {
			cs, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", field)
			for _, c := range cs {
				if img, ok := c.(map[string]any)["image"].(string); ok {
					out = append(out, img)
				}
			}
		}
	}
	return out
}
