package testcluster

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	_ "embed" // the static programs' sources
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

//go:embed pause/main.go
var pauseSource []byte

//go:embed volhelper/main.go
var volHelperSource []byte

// staticProgram is a one-file Go program of the harness, built static and
// packed alone in an image: the pause program, the local-path helper.
type staticProgram struct {
	name   string // the binary's name, /<name> in the image
	source []byte // its main.go (standard library only)
	user   string // the image's user
}

// pauseProgram is the sandbox image's program; volHelperProgram the helper
// pod's of the local-path-provisioner (as root: it makes directories in a host
// directory of root's).
var (
	pauseProgram     = staticProgram{name: "pause", source: pauseSource, user: "65535:65535"}
	volHelperProgram = staticProgram{name: "volhelper", source: volHelperSource, user: "0:0"}
)

// key names one build of the program: its source and target.
func (p staticProgram) key() string {
	sum := sha256.Sum256(append(append([]byte(p.name+"\x00"), p.source...), runtime.GOARCH...))
	return hex.EncodeToString(sum[:])[:16]
}

// pauseKey names one build of the pause program.
func pauseKey() string { return pauseProgram.key() }

// build compiles the program (static, CGO_ENABLED=0) into
// cacheDir/<name>-<key>/<name> unless it is already there, and returns its path.
// It needs the Go toolchain and nothing from the network: the program imports
// only the standard library.
func (p staticProgram) build(ctx context.Context, cacheDir string) (string, error) {
	dir := filepath.Join(cacheDir, p.name+"-"+p.key())
	bin := filepath.Join(dir, p.name)
	if st, err := os.Stat(bin); err == nil && st.Mode().IsRegular() {
		return bin, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("%s: %w", p.name, err)
	}
	src, err := os.MkdirTemp(dir, "src-")
	if err != nil {
		return "", fmt.Errorf("%s: %w", p.name, err)
	}
	defer os.RemoveAll(src)
	files := map[string][]byte{
		"go.mod":  []byte("module pcsync.invalid/" + p.name + "\n\ngo 1.22\n"),
		"main.go": p.source,
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(src, name), data, 0o644); err != nil {
			return "", fmt.Errorf("%s: %w", p.name, err)
		}
	}
	tmp := filepath.Join(src, p.name+".out")
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags=-s -w -buildid=", "-o", tmp, ".")
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOWORK=off", "GOFLAGS=-buildvcs=false", "GOTOOLCHAIN=local")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("%s: go build: %w\n%s", p.name, err, out)
	}
	if err := os.Rename(tmp, bin); err != nil {
		return "", fmt.Errorf("%s: %w", p.name, err)
	}
	return bin, nil
}

// image builds the program and packs it as /<name> into a one-layer image
// whose entrypoint it is.
func (p staticProgram) image(ctx context.Context, cacheDir string) (v1.Image, error) {
	bin, err := p.build(ctx, cacheDir)
	if err != nil {
		return nil, err
	}
	return binaryImage(bin, p.name, p.user)
}

// binaryImage packs the executable bin as /<name> into a one-layer image whose
// entrypoint it is, running as user.
func binaryImage(bin, name, user string) (v1.Image, error) {
	data, err := os.ReadFile(bin)
	if err != nil {
		return nil, fmt.Errorf("%s image: %w", name, err)
	}
	layerTar, err := tarFiles([]tarFile{{name: name, mode: 0o755, data: data}})
	if err != nil {
		return nil, fmt.Errorf("%s image: %w", name, err)
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithCompressionLevel(gzip.BestSpeed))
	if err != nil {
		return nil, fmt.Errorf("%s image: layer: %w", name, err)
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return nil, fmt.Errorf("%s image: %w", name, err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("%s image: config: %w", name, err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", runtime.GOARCH
	cf.Config.Entrypoint = []string{"/" + name}
	cf.Config.User = user
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, fmt.Errorf("%s image: config: %w", name, err)
	}
	return img, nil
}

// tarFile is one regular file of a layer.
type tarFile struct {
	name string
	mode int64
	data []byte
}

// tarFiles returns an uncompressed tar stream of files, owned by root, with a fixed
// modification time (the same input gives the same digest).
func tarFiles(files []tarFile) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		hdr := &tar.Header{
			Name:     f.name,
			Mode:     f.mode,
			Size:     int64(len(f.data)),
			Typeflag: tar.TypeReg,
			ModTime:  time.Unix(0, 0),
			Format:   tar.FormatPAX,
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, fmt.Errorf("tar %s: %w", f.name, err)
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, fmt.Errorf("tar %s: %w", f.name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("tar: %w", err)
	}
	return buf.Bytes(), nil
}
