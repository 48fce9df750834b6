package testcluster

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// Registry is an OCI registry (the distribution API, plain HTTP) on 127.0.0.1 that
// the real node's containerd pulls from. Blobs are kept on disk, manifests in
// memory: it lives as long as the process that started it. Images pushed to it are
// named Host()+"/"+repository+":"+tag, e.g. "127.0.0.1:40123/agents/claude:1".
type Registry struct {
	host string // 127.0.0.1:port
	// Only for a registry this process serves:
	blobDir string
	server  *http.Server
	done    chan error
}

// startRegistry serves a registry on a free loopback port with its blobs under
// blobDir, logging requests that fail to logPath.
func startRegistry(blobDir, logPath string) (*Registry, error) {
	if err := os.MkdirAll(blobDir, 0o755); err != nil {
		return nil, fmt.Errorf("registry: blob dir: %w", err)
	}
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("registry: log: %w", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		_ = logFile.Close()
		return nil, fmt.Errorf("registry: listen: %w", err)
	}
	h := registry.New(
		registry.WithBlobHandler(diskBlobs{BlobHandler: registry.NewDiskBlobHandler(blobDir), dir: blobDir}),
		registry.Logger(log.New(logFile, "", log.LstdFlags|log.Lmicroseconds)),
	)
	r := &Registry{
		host:    l.Addr().String(),
		blobDir: blobDir,
		server: &http.Server{
			Handler:           h,
			ReadHeaderTimeout: 30 * time.Second,
			ErrorLog:          log.New(logFile, "http: ", log.LstdFlags),
		},
		done: make(chan error, 1),
	}
	go func() {
		err := r.server.Serve(l)
		_ = logFile.Close()
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		r.done <- err
	}()
	return r, nil
}

// diskBlobs is go-containerregistry's disk blob handler with a Stat that reads the
// file's size instead of hashing the whole blob on every HEAD and GET (hundreds of
// MB for an agent image's layer). Every blob is written to a temporary file and
// renamed into place once its digest was checked, by the handler's Put and by
// storeBlob, so a file that exists is complete.
type diskBlobs struct {
	registry.BlobHandler
	dir string
}

// Stat returns the blob's size, or registry.ErrNotFound.
func (d diskBlobs) Stat(_ context.Context, _ string, h v1.Hash) (int64, error) {
	st, err := os.Stat(filepath.Join(d.dir, h.Algorithm, h.Hex))
	if errors.Is(err, fs.ErrNotExist) {
		return 0, registry.ErrNotFound
	}
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}

// Put stores a blob through the disk handler.
func (d diskBlobs) Put(ctx context.Context, repo string, h v1.Hash, rc io.ReadCloser) error {
	return d.BlobHandler.(registry.BlobPutHandler).Put(ctx, repo, h, rc)
}

// Delete removes a blob through the disk handler.
func (d diskBlobs) Delete(ctx context.Context, repo string, h v1.Hash) error {
	return d.BlobHandler.(registry.BlobDeleteHandler).Delete(ctx, repo, h)
}

// Host returns the registry's host:port ("127.0.0.1:NNNNN"), the first element of
// every image reference it serves.
func (r *Registry) Host() string { return r.host }

// Ref returns the full reference of repoTag ("repository:tag" or
// "repository@sha256:…") in this registry.
func (r *Registry) Ref(repoTag string) string { return r.host + "/" + strings.TrimPrefix(repoTag, "/") }

// Push uploads img under ref, which must name this registry (see Ref), over plain
// HTTP. Layers the registry already has are not sent again. When this process
// serves the registry, the layers are first streamed straight into its blob
// directory (the registry's HTTP upload would hold each one in memory), so pushing
// an image of hundreds of MB costs disk, not memory.
func (r *Registry) Push(ctx context.Context, ref string, img v1.Image) error {
	tag, err := r.parse(ref)
	if err != nil {
		return err
	}
	if r.blobDir != "" {
		if err := r.storeLayers(ctx, img); err != nil {
			return fmt.Errorf("registry: push %s: %w", ref, err)
		}
	}
	if err := remote.Write(tag, img, remote.WithContext(ctx)); err != nil {
		return fmt.Errorf("registry: push %s: %w", ref, err)
	}
	return nil
}

// Image reads back the image ref from the registry (e.g. to check a digest).
func (r *Registry) Image(ctx context.Context, ref string) (v1.Image, error) {
	tag, err := r.parse(ref)
	if err != nil {
		return nil, err
	}
	img, err := remote.Image(tag, remote.WithContext(ctx))
	if err != nil {
		return nil, fmt.Errorf("registry: get %s: %w", ref, err)
	}
	return img, nil
}

// storeLayers writes every layer of img that the blob directory lacks, verifying
// its digest, where the registry's disk blob handler reads it.
func (r *Registry) storeLayers(ctx context.Context, img v1.Image) error {
	layers, err := img.Layers()
	if err != nil {
		return fmt.Errorf("layers: %w", err)
	}
	for _, l := range layers {
		if err := ctx.Err(); err != nil {
			return err
		}
		h, err := l.Digest()
		if err != nil {
			return fmt.Errorf("layer digest: %w", err)
		}
		if h.Algorithm != "sha256" {
			continue // remote.Write uploads it
		}
		if err := r.storeBlob(h, l.Compressed); err != nil {
			return err
		}
	}
	return nil
}

// storeBlob streams one blob into blobDir/sha256/<hex> unless it is there.
func (r *Registry) storeBlob(h v1.Hash, open func() (io.ReadCloser, error)) error {
	dst := filepath.Join(r.blobDir, h.Algorithm, h.Hex)
	if _, err := os.Stat(dst); err == nil {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return fmt.Errorf("blob %s: %w", h, err)
	}
	rc, err := open()
	if err != nil {
		return fmt.Errorf("blob %s: %w", h, err)
	}
	defer rc.Close()
	f, err := os.CreateTemp(r.blobDir, "push-*")
	if err != nil {
		return fmt.Errorf("blob %s: %w", h, err)
	}
	defer os.Remove(f.Name()) // after a successful rename there is nothing to remove
	sum := sha256.New()
	_, err = io.Copy(io.MultiWriter(f, sum), rc)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("blob %s: %w", h, err)
	}
	if got := hex.EncodeToString(sum.Sum(nil)); got != h.Hex {
		return fmt.Errorf("blob %s: the layer's content hashes to sha256:%s", h, got)
	}
	if err := os.Rename(f.Name(), dst); err != nil {
		return fmt.Errorf("blob %s: %w", h, err)
	}
	return nil
}

func (r *Registry) parse(ref string) (name.Reference, error) {
	parsed, err := name.ParseReference(ref, name.Insecure, name.StrictValidation)
	if err != nil {
		return nil, fmt.Errorf("registry: reference %q: %w", ref, err)
	}
	if parsed.Context().RegistryStr() != r.host {
		return nil, fmt.Errorf("registry: reference %q does not name this registry (%s)", ref, r.host)
	}
	return parsed, nil
}

// close stops serving and waits for the server to end. It closes every
// connection at once rather than shutting down gracefully: a client's connection
// that was dialled but never carried a request counts as active to
// http.Server.Shutdown for its first 5 s, which made a graceful stop time out, and
// by the time a cluster's registry is closed no pull or push is wanted any more.
func (r *Registry) close(ctx context.Context) error {
	if r == nil || r.server == nil {
		return nil
	}
	err := r.server.Close()
	select {
	case serr := <-r.done:
		err = errors.Join(err, serr)
	case <-ctx.Done():
	}
	if err != nil {
		return fmt.Errorf("registry %s: stop: %w", r.host, err)
	}
	return nil
}
