package testcluster

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	_ "embed" // the pause program's source
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

// pauseKey names one build of the pause program: its source and target.
func pauseKey() string {
	sum := sha256.Sum256(append(append([]byte{}, pauseSource...), runtime.GOARCH...))
	return hex.EncodeToString(sum[:])[:16]
}

// buildPause compiles the pause program (static, CGO_ENABLED=0) into
// cacheDir/pause-<key>/pause unless it is already there, and returns its path. It
// needs the Go toolchain and nothing from the network: the program imports only
// the standard library.
func buildPause(ctx context.Context, cacheDir string) (string, error) {
	dir := filepath.Join(cacheDir, "pause-"+pauseKey())
	bin := filepath.Join(dir, "pause")
	if st, err := os.Stat(bin); err == nil && st.Mode().IsRegular() {
		return bin, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("pause: %w", err)
	}
	src, err := os.MkdirTemp(dir, "src-")
	if err != nil {
		return "", fmt.Errorf("pause: %w", err)
	}
	defer os.RemoveAll(src)
	files := map[string][]byte{
		"go.mod":  []byte("module pcsync.invalid/pause\n\ngo 1.22\n"),
		"main.go": pauseSource,
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(src, name), data, 0o644); err != nil {
			return "", fmt.Errorf("pause: %w", err)
		}
	}
	tmp := filepath.Join(src, "pause.out")
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags=-s -w -buildid=", "-o", tmp, ".")
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOWORK=off", "GOFLAGS=-buildvcs=false", "GOTOOLCHAIN=local")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("pause: go build: %w\n%s", err, out)
	}
	if err := os.Rename(tmp, bin); err != nil {
		return "", fmt.Errorf("pause: %w", err)
	}
	return bin, nil
}

// pauseImage packs the pause binary as /pause into a one-layer image whose
// entrypoint it is, running as 65535:65535.
func pauseImage(bin string) (v1.Image, error) {
	data, err := os.ReadFile(bin)
	if err != nil {
		return nil, fmt.Errorf("pause image: %w", err)
	}
	layerTar, err := tarFiles([]tarFile{{name: "pause", mode: 0o755, data: data}})
	if err != nil {
		return nil, fmt.Errorf("pause image: %w", err)
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	})
	if err != nil {
		return nil, fmt.Errorf("pause image: layer: %w", err)
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return nil, fmt.Errorf("pause image: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("pause image: config: %w", err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", runtime.GOARCH
	cf.Config.Entrypoint = []string{"/pause"}
	cf.Config.User = "65535:65535"
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, fmt.Errorf("pause image: config: %w", err)
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
