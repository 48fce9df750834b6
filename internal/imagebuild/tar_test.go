package imagebuild

import (
	"archive/tar"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// entry is what the tests compare of a tar header.
type entry struct {
	Name     string
	Type     byte
	Mode     int64
	Uid, Gid int
	Link     string
	Body     string
}

// readEntries returns the entries of an uncompressed layer.
func readEntries(t *testing.T, r io.Reader) []entry {
	t.Helper()
	var out []entry
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if !h.ModTime.Equal(epoch) {
			t.Errorf("%s: mtime %v, want %v", h.Name, h.ModTime, epoch)
		}
		out = append(out, entry{h.Name, h.Typeflag, h.Mode, h.Uid, h.Gid, h.Linkname, string(body)})
	}
}

func TestWriteLayer(t *testing.T) {
	src := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(src, "usr", "bin"), 0o755))
	must(os.MkdirAll(filepath.Join(src, "dev", "pts"), 0o755))
	must(os.WriteFile(filepath.Join(src, "dev", "null"), nil, 0o666))
	must(os.WriteFile(filepath.Join(src, "usr", "bin", "tool"), []byte("#!/bin/sh\n"), 0o755))
	must(os.Link(filepath.Join(src, "usr", "bin", "tool"), filepath.Join(src, "usr", "bin", "tool2")))
	must(os.Symlink("tool", filepath.Join(src, "usr", "bin", "alias")))
	must(os.WriteFile(filepath.Join(src, "setuid"), []byte("x"), 0o644))
	must(os.Chmod(filepath.Join(src, "setuid"), os.ModeSetuid|0o755))
	must(os.WriteFile(filepath.Join(src, "hostname"), []byte("vm"), 0o644))

	dst := t.TempDir()
	l, err := writeLayer(src, dst, tarOptions{Root: true, Skip: skipUnder([]string{"dev"}, "hostname")})
	if err != nil {
		t.Fatal(err)
	}
	rc, err := l.Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	got := readEntries(t, rc)
	want := []entry{
		{Name: "dev/", Type: tar.TypeDir, Mode: 0o755},
		{Name: "setuid", Type: tar.TypeReg, Mode: 0o4755, Body: "x"},
		{Name: "usr/", Type: tar.TypeDir, Mode: 0o755},
		{Name: "usr/bin/", Type: tar.TypeDir, Mode: 0o755},
		{Name: "usr/bin/alias", Type: tar.TypeSymlink, Mode: 0o777, Link: "tool"},
		{Name: "usr/bin/tool", Type: tar.TypeReg, Mode: 0o755, Body: "#!/bin/sh\n"},
		{Name: "usr/bin/tool2", Type: tar.TypeLink, Mode: 0o755, Link: "usr/bin/tool"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("layer entries (-want +got):\n%s", diff)
	}

	// The cached layer reads back with the same digests, and they are
	// those of its bytes.
	again, err := readLayer(dst)
	if err != nil {
		t.Fatal(err)
	}
	d1, _ := l.Digest()
	d2, _ := again.Digest()
	if d1 != d2 {
		t.Errorf("digest %v, read back %v", d1, d2)
	}
	sum, err := fileSHA256(filepath.Join(dst, layerFile))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff("sha256:"+sum, d1.String()); diff != "" {
		t.Errorf("digest vs the file's sha256 (-want +got):\n%s", diff)
	}
}
