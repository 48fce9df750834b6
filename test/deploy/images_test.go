package deploy

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/pcsync/pcsync/internal/imagebuild"
	"github.com/pcsync/pcsync/pkg/images"
)

// publicImage is a public project's release that deploy/ runs, pinned, and
// the test that runs it (its stand-in, built here from the same release,
// since no image can be pulled on these machines) on the real node.
type publicImage struct {
	tag, test string
}

// publicImages are the only images of deploy/ that this repository does
// not build.
var publicImages = map[string]publicImage{
	// Paperclip's published image; the stand-in is imagebuild.PaperclipStandIn.
	"ghcr.io/paperclipai/paperclip": {imagebuild.PaperclipVersion, "test/realnode TestPaperclipOverlay"},
	// git-sync; its module is not served here, the substitute is
	// test/realnode/testdata/git-sync-substitute.sh.
	"registry.k8s.io/git-sync/git-sync": {"v4.4.0", "test/realnode TestDeployBaseGitSync"},
}

// Every image that a manifest under deploy/ names is either one that
// `make images` builds (named as pcsync's catalog names it, for kustomize's
// images to point at the user's registry) or a public release pinned to the
// version publicImages names, which a real-node test runs. A new image, a
// tag that moves (latest) or another release fails here.
func TestEveryImageIsBuiltOrPinned(t *testing.T) {
	built := map[string]bool{}
	for _, s := range images.All() {
		built[s.Name] = true
	}
	refs := deployImages(t)
	if len(refs) == 0 {
		t.Fatal("no image found under deploy/")
	}
	var seen []string
	for _, r := range refs {
		name, tag := r.ref, ""
		if i := strings.LastIndex(r.ref, ":"); i > strings.LastIndex(r.ref, "/") {
			name, tag = r.ref[:i], r.ref[i+1:]
		}
		seen = append(seen, name)
		switch pub, ok := publicImages[name]; {
		case built[name] && tag == "":
		case built[name]:
			t.Errorf("%s: %s names pcsync's image %q with a tag: leave the tag to kustomize's images (docs/images.md)", r.file, r.where, r.ref)
		case !ok:
			t.Errorf("%s: %s runs %q, which nothing in this repository builds and no pinned release names", r.file, r.where, r.ref)
		case tag != pub.tag:
			t.Errorf("%s: %s runs %q, want the release %s:%s that %s runs", r.file, r.where, r.ref, name, pub.tag, pub.test)
		}
	}
	for name := range publicImages {
		if !strings.Contains(strings.Join(seen, " "), name) {
			t.Errorf("publicImages names %s, which deploy/ no longer runs", name)
		}
	}
}

// imageRef is an image a manifest names, and where.
type imageRef struct {
	file, where, ref string
}

// deployImages returns the images of every container and init container,
// and of every kustomization's images entry, in the YAML files under
// deploy/ (overlays, patches and components alike).
func deployImages(t *testing.T) []imageRef {
	t.Helper()
	var out []imageRef
	err := filepath.WalkDir(deployDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || (filepath.Ext(path) != ".yaml" && filepath.Ext(path) != ".yml") {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(deployDir, path)
		if err != nil {
			return err
		}
		file := filepath.ToSlash(filepath.Join("deploy", rel))
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
		for {
			var doc any
			if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				return err
			}
			collectImages(doc, file, &out)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].file+out[i].where < out[j].file+out[j].where })
	return out
}

// collectImages walks a decoded document for containers ({name, image})
// and kustomize images entries ({name, newName, newTag}).
func collectImages(v any, file string, out *[]imageRef) {
	switch v := v.(type) {
	case map[string]any:
		name, _ := v["name"].(string)
		if img, ok := v["image"].(string); ok && name != "" {
			*out = append(*out, imageRef{file, "container " + name, img})
		}
		if nn, ok := v["newName"].(string); ok {
			ref := nn
			if tag, ok := v["newTag"].(string); ok {
				ref += ":" + tag
			}
			*out = append(*out, imageRef{file, "kustomize image " + name, ref})
		}
		for _, c := range v {
			collectImages(c, file, out)
		}
	case []any:
		for _, c := range v {
			collectImages(c, file, out)
		}
	}
}
