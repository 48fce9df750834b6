package testimages

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
)

// A stand-in on a given base holds its files over the base's layers (the
// layer WithFiles makes of them); an entrypoint, when set, replaces the base's and
// clears its Cmd, and a user is set; with neither, the base's config is
// kept.
func TestStandInImage(t *testing.T) {
	base, err := random.Image(64, 1)
	if err != nil {
		t.Fatal(err)
	}
	base, err = mutate.Config(base, v1.Config{Entrypoint: []string{"/bin/base"}, Cmd: []string{"serve"}, User: "0:0"})
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{"usr/local/bin/claude": "#!/bin/sh\necho stand-in\n", "usr/local/share/t.jsonl": "{}\n"}
	withFiles, err := WithFiles(base, files)
	if err != nil {
		t.Fatal(err)
	}
	wl, err := withFiles.Layers()
	if err != nil {
		t.Fatal(err)
	}
	filesLayer := wl[len(wl)-1]
	tests := []struct {
		name       string
		entrypoint []string
		user       string
		want       v1.Config
	}{
		{"files only", nil, "", v1.Config{Entrypoint: []string{"/bin/base"}, Cmd: []string{"serve"}, User: "0:0"}},
		{"entrypoint and user", []string{"/usr/bin/tini", "--", "/usr/local/bin/claude"}, "65533:65533",
			v1.Config{Entrypoint: []string{"/usr/bin/tini", "--", "/usr/local/bin/claude"}, User: "65533:65533"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := DefaultStandInOptions()
			o.Base, o.Files, o.Entrypoint, o.User = base, files, tt.entrypoint, tt.user
			img, err := o.image(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			cf, err := img.ConfigFile()
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, cf.Config); diff != "" {
				t.Errorf("config (-want +got):\n%s", diff)
			}
			layers, err := img.Layers()
			if err != nil || len(layers) != 2 {
				t.Fatalf("%d layers (%v); want the base's and the files'", len(layers), err)
			}
			if got, want := digest(t, layers[1]), digest(t, filesLayer); got != want {
				t.Errorf("the stand-in's layer %s; want WithFiles' layer of its files, %s", got, want)
			}
		})
	}
}

func digest(t *testing.T, l v1.Layer) string {
	t.Helper()
	h, err := l.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return h.String()
}
