package imagebuild

import (
	"archive/tar"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// epoch is every file's modification time in a layer, so that a layer's
// digest depends on its content only.
var epoch = time.Unix(0, 0).UTC()

// Layer file names inside a cache entry (or a build's temporary directory).
const (
	layerFile = "layer.tar.gz"
	layerMeta = "layer.json"
)

// tarOptions says how a directory becomes a layer.
type tarOptions struct {
	// Skip reports whether a path (relative, slash-separated, no leading
	// slash) is left out; a skipped directory's content is left out too.
	Skip func(rel string) bool
	// Root, when set, makes every entry owned by 0:0 (files installed by
	// npm or go build); otherwise the owners on disk are kept.
	Root bool
}

// layerInfo is what a layer's metadata file holds.
type layerInfo struct {
	Digest string `json:"digest"`
	DiffID string `json:"diffID"`
	Size   int64  `json:"size"`
}

// writeLayer packs the directory src as a gzip-compressed tar into
// dst/layer.tar.gz, with its digests in dst/layer.json, and returns it as a
// v1.Layer. Entries are in lexical order with a fixed modification time;
// symbolic links stay links, hard links (files with more than one link)
// become tar hard links to their first path, devices, sockets and pipes
// are left out.
func writeLayer(src, dst string, o tarOptions) (v1.Layer, error) {
	f, err := os.Create(filepath.Join(dst, layerFile))
	if err != nil {
		return nil, fmt.Errorf("layer %s: %w", src, err)
	}
	defer f.Close()
	digest, diffID := sha256.New(), sha256.New()
	counter := &countWriter{w: io.MultiWriter(f, digest)}
	gz, _ := gzip.NewWriterLevel(counter, gzip.DefaultCompression)
	tw := tar.NewWriter(io.MultiWriter(gz, diffID))
	if err := tarTree(tw, src, o); err != nil {
		return nil, fmt.Errorf("layer %s: %w", src, err)
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("layer %s: %w", src, err)
	}
	if err := gz.Close(); err != nil {
		return nil, fmt.Errorf("layer %s: %w", src, err)
	}
	if err := f.Close(); err != nil {
		return nil, fmt.Errorf("layer %s: %w", src, err)
	}
	info := layerInfo{Digest: hashString(digest), DiffID: hashString(diffID), Size: counter.n}
	data, _ := json.Marshal(info)
	if err := os.WriteFile(filepath.Join(dst, layerMeta), data, 0o644); err != nil {
		return nil, fmt.Errorf("layer %s: %w", src, err)
	}
	return readLayer(dst)
}

// tarTree writes src's tree into tw.
func tarTree(tw *tar.Writer, src string, o tarOptions) error {
	type inode struct{ dev, ino uint64 }
	seen := map[inode]string{}
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		if rel == "." {
			return nil
		}
		rel = filepath.ToSlash(rel)
		if o.Skip != nil && o.Skip(rel) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		mode := fi.Mode()
		if mode&(fs.ModeDevice|fs.ModeCharDevice|fs.ModeSocket|fs.ModeNamedPipe|fs.ModeIrregular) != 0 {
			return nil
		}
		link := ""
		if mode&fs.ModeSymlink != 0 {
			if link, err = os.Readlink(p); err != nil {
				return err
			}
		}
		h, err := tar.FileInfoHeader(fi, link)
		if err != nil {
			return fmt.Errorf("%s: %w", rel, err)
		}
		h.Name = rel
		if fi.IsDir() {
			h.Name += "/"
		}
		h.Uname, h.Gname = "", ""
		h.ModTime, h.AccessTime, h.ChangeTime = epoch, time.Time{}, time.Time{}
		h.Format = tar.FormatPAX
		st, _ := fi.Sys().(*syscall.Stat_t)
		if o.Root || st == nil {
			h.Uid, h.Gid = 0, 0
		} else {
			h.Uid, h.Gid = int(st.Uid), int(st.Gid)
		}
		if mode.IsRegular() && st != nil && st.Nlink > 1 {
			key := inode{uint64(st.Dev), st.Ino} //nolint:unconvert // Dev is not a uint64 on every architecture
			if first, ok := seen[key]; ok {
				h.Typeflag, h.Linkname, h.Size = tar.TypeLink, first, 0
				return tw.WriteHeader(h)
			}
			seen[key] = rel
		}
		if err := tw.WriteHeader(h); err != nil {
			return fmt.Errorf("%s: %w", rel, err)
		}
		if !mode.IsRegular() {
			return nil
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		if _, err := io.Copy(tw, f); err != nil {
			return fmt.Errorf("%s: %w", rel, err)
		}
		return nil
	})
}

// skipUnder returns a Skip that leaves out what is inside each of dirs
// (slash-separated, relative) but keeps the directories themselves, and
// each of files.
func skipUnder(dirs []string, files ...string) func(string) bool {
	return func(rel string) bool {
		for _, f := range files {
			if rel == f {
				return true
			}
		}
		for _, d := range dirs {
			if strings.HasPrefix(rel, d+"/") {
				return true
			}
		}
		return false
	}
}

// readLayer returns the layer that writeLayer left in dir.
func readLayer(dir string) (v1.Layer, error) {
	data, err := os.ReadFile(filepath.Join(dir, layerMeta))
	if err != nil {
		return nil, fmt.Errorf("layer %s: %w", dir, err)
	}
	var info layerInfo
	if err := json.Unmarshal(data, &info); err != nil {
		return nil, fmt.Errorf("layer %s: %w", dir, err)
	}
	l := &fileLayer{path: filepath.Join(dir, layerFile), size: info.Size}
	if l.digest, err = v1.NewHash(info.Digest); err != nil {
		return nil, fmt.Errorf("layer %s: %w", dir, err)
	}
	if l.diffID, err = v1.NewHash(info.DiffID); err != nil {
		return nil, fmt.Errorf("layer %s: %w", dir, err)
	}
	return l, nil
}

// fileLayer is a gzip-compressed layer in a file whose digests are known.
type fileLayer struct {
	path           string
	digest, diffID v1.Hash
	size           int64
}

// Digest is the compressed layer's sha256.
func (l *fileLayer) Digest() (v1.Hash, error) { return l.digest, nil }

// DiffID is the uncompressed layer's sha256.
func (l *fileLayer) DiffID() (v1.Hash, error) { return l.diffID, nil }

// Size is the compressed layer's size.
func (l *fileLayer) Size() (int64, error) { return l.size, nil }

// MediaType is the OCI gzip layer type.
func (l *fileLayer) MediaType() (types.MediaType, error) { return types.OCILayer, nil }

// Compressed opens the layer file.
func (l *fileLayer) Compressed() (io.ReadCloser, error) { return os.Open(l.path) }

// Uncompressed opens the layer file through gunzip.
func (l *fileLayer) Uncompressed() (io.ReadCloser, error) {
	f, err := os.Open(l.path)
	if err != nil {
		return nil, err
	}
	gz, err := gzip.NewReader(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("layer %s: %w", l.path, err)
	}
	return readCloser{Reader: gz, close: func() error { gz.Close(); return f.Close() }}, nil
}

// readCloser joins a reader and a close function.
type readCloser struct {
	io.Reader
	close func() error
}

// Close runs the close function.
func (r readCloser) Close() error { return r.close() }

// countWriter counts what goes through it.
type countWriter struct {
	w io.Writer
	n int64
}

// Write writes p and counts it.
func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// hashString formats a sha256 as "sha256:<hex>".
func hashString(h hash.Hash) string {
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}
