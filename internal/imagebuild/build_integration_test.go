//go:build integration

package imagebuild

import (
	"archive/tar"
	"errors"
	"io"
	"log"
	"log/slog"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/pcsync/pcsync/pkg/images"
)

// file is what the test checks of a path in an image.
type file struct {
	Type     byte
	Uid, Gid int
	Mode     int64
}

// files returns an image's file system as path → file, later layers
// winning, reading each layer (by digest) once across calls.
func files(t *testing.T, img v1.Image, seen map[v1.Hash][]*tar.Header) map[string]file {
	t.Helper()
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]file{}
	for _, l := range layers {
		d, err := l.Digest()
		if err != nil {
			t.Fatal(err)
		}
		hs, ok := seen[d]
		if !ok {
			rc, err := l.Uncompressed()
			if err != nil {
				t.Fatal(err)
			}
			tr := tar.NewReader(rc)
			for {
				h, err := tr.Next()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatalf("layer %s: %v", d, err)
				}
				hs = append(hs, h)
			}
			rc.Close()
			seen[d] = hs
		}
		for _, h := range hs {
			out["/"+strings.TrimSuffix(h.Name, "/")] = file{h.Typeflag, h.Uid, h.Gid, h.Mode & 0o7777}
		}
	}
	return out
}

// TestBuildAll builds every image of the catalog with the Go builder (the
// CLIs' --version run in a chroot of each), checks each image's config
// against the catalog and its files (node, the CLI's link, pcsync, tini,
// git, rg, sh, the user's home owned by 1000), builds again from the warm
// cache and wants the same digests, then writes an OCI layout and pushes
// to a registry and reads both back. It needs root, debootstrap and npm:
// Build fails naming what is missing.
func TestBuildAll(t *testing.T) {
	ctx := t.Context()
	o := DefaultOptions()
	o.Version = "v0.0.0-test"
	o.Logger = slog.New(slog.NewTextHandler(t.Output(), nil))
	built, err := Build(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, b := range built {
		names = append(names, b.Name)
	}
	var want []string
	for _, s := range images.All() {
		want = append(want, s.Name)
	}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Fatalf("built images (-want +got):\n%s", diff)
	}

	base := images.DefaultBase()
	seen := map[v1.Hash][]*tar.Header{}
	for _, b := range built {
		s, err := images.Lookup(b.Name)
		if err != nil {
			t.Fatal(err)
		}
		cf, err := b.Image.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(ConfigOf(s, base, o.Version), cf.Config); diff != "" {
			t.Errorf("%s: config (-want +got):\n%s", b.Name, diff)
		}
		if cf.OS != "linux" || cf.Architecture != o.Arch {
			t.Errorf("%s: platform %s/%s, want linux/%s", b.Name, cf.OS, cf.Architecture, o.Arch)
		}
		fs := files(t, b.Image, seen)
		wantFiles := map[string]file{
			"/usr/local/bin/node":                {tar.TypeReg, 0, 0, 0o755},
			"/usr/local/bin/pcsync":              {tar.TypeReg, 0, 0, 0o755},
			"/usr/bin/tini":                      {tar.TypeReg, 0, 0, 0o755},
			"/usr/bin/git":                       {tar.TypeReg, 0, 0, 0o755},
			"/usr/bin/rg":                        {tar.TypeReg, 0, 0, 0o755},
			"/usr/bin/base64":                    {tar.TypeReg, 0, 0, 0o755},
			"/usr/bin/tar":                       {tar.TypeReg, 0, 0, 0o755},
			"/bin":                               {tar.TypeSymlink, 0, 0, 0o777},
			"/home/agent":                        {tar.TypeDir, 1000, 1000, 0o755},
			"/workspace":                         {tar.TypeDir, 1000, 1000, 0o755},
			"/tmp":                               {tar.TypeDir, 0, 0, 0o1777},
			"/etc/ssl/certs/ca-certificates.crt": {tar.TypeReg, 0, 0, 0o644},
		}
		if s.Binary != "" {
			wantFiles["/usr/local/bin/"+s.Binary] = file{tar.TypeSymlink, 0, 0, 0o777}
		}
		got := map[string]file{}
		for p := range wantFiles {
			if f, ok := fs[p]; ok {
				got[p] = f
			}
		}
		if diff := cmp.Diff(wantFiles, got); diff != "" {
			t.Errorf("%s: files (-want +got):\n%s", b.Name, diff)
		}
		for _, p := range []string{"/usr/share/doc/git", "/var/lib/apt/lists/lock", "/etc/hostname", "/dev/null", "/usr/local/lib/node_modules/npm"} {
			if _, ok := fs[p]; ok {
				t.Errorf("%s: holds %s", b.Name, p)
			}
		}
		if s.Package != "" && !strings.Contains(b.CLIVersion, s.Version) {
			t.Errorf("%s: %s --version = %q, want %s", b.Name, s.Binary, b.CLIVersion, s.Version)
		}
	}

	// Warm: the same layers but pcsync's, the base's third, which is
	// rebuilt from the working tree (that others may edit meanwhile; with
	// the same sources it is the same binary). The CLIs ran above.
	warm := o
	warm.Verify = false
	again, err := Build(ctx, warm)
	if err != nil {
		t.Fatal(err)
	}
	layerDigests := func(bs []Built) map[string][]string {
		m := map[string][]string{}
		for _, b := range bs {
			layers, err := b.Image.Layers()
			if err != nil {
				t.Fatal(err)
			}
			for i, l := range layers {
				d, err := l.Digest()
				if err != nil {
					t.Fatal(err)
				}
				if i == 2 {
					continue
				}
				m[b.Name] = append(m[b.Name], d.String())
			}
		}
		return m
	}
	if diff := cmp.Diff(layerDigests(built), layerDigests(again)); diff != "" {
		t.Errorf("a warm build's layers (-first +second):\n%s", diff)
	}
	wantDigests := map[string]string{}
	for _, b := range built {
		d, err := b.Image.Digest()
		if err != nil {
			t.Fatal(err)
		}
		wantDigests[b.Name] = d.String()
	}

	// An OCI layout, read back.
	dir := t.TempDir()
	if err := WriteLayout(dir, "dev", built); err != nil {
		t.Fatal(err)
	}
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	fromLayout := map[string]string{}
	for _, m := range im.Manifests {
		ref, _, _ := strings.Cut(m.Annotations[RefNameAnnotation], ":")
		fromLayout[ref] = m.Digest.String()
	}
	if diff := cmp.Diff(wantDigests, fromLayout); diff != "" {
		t.Errorf("layout's images (-built +layout):\n%s", diff)
	}

	// A registry at host:port with an org path, read back: the base, the
	// smallest agent image and pcsync's (the in-memory registry holds what
	// it gets in memory).
	var small []Built
	for _, b := range built {
		if b.Name == images.Base || b.Name == images.Agent("acpx") || b.Name == images.Pcsync {
			small = append(small, b)
		}
	}
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	u, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	reg := u.Host + "/pcsync"
	refs, err := Push(ctx, reg, "dev", small, DefaultPushOptions())
	if err != nil {
		t.Fatal(err)
	}
	pulled := map[string]string{}
	for _, r := range refs {
		ref, err := name.ParseReference(r, name.Insecure)
		if err != nil {
			t.Fatal(err)
		}
		desc, err := remote.Head(ref, remote.WithContext(ctx))
		if err != nil {
			t.Fatalf("%s: %v", r, err)
		}
		n := strings.TrimPrefix(ref.Context().RepositoryStr(), "pcsync/")
		pulled[n] = desc.Digest.String()
	}
	wantPushed := map[string]string{}
	for _, b := range small {
		wantPushed[b.Name] = wantDigests[b.Name]
	}
	if diff := cmp.Diff(wantPushed, pulled); diff != "" {
		t.Errorf("registry's images (-built +registry):\n%s", diff)
	}
}
