package imagebuild

import (
	"context"
	"fmt"
	"net"
	"os"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/match"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/pcsync/pcsync/pkg/images"
)

// RefNameAnnotation is the OCI annotation that names an image of a layout
// ("pcsync-agent-claude:v1.2.3").
const RefNameAnnotation = "org.opencontainers.image.ref.name"

// WriteLayout writes built into the OCI image layout at dir (made when
// missing), each image annotated with RefNameAnnotation name:tag and
// replacing an image of the same name and tag; blobs the layout holds are
// not written again.
func WriteLayout(dir, tag string, built []Built) error {
	p, err := layout.FromPath(dir)
	if err != nil {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("layout %s: %w", dir, err)
		}
		if p, err = layout.Write(dir, empty.Index); err != nil {
			return fmt.Errorf("layout %s: %w", dir, err)
		}
	}
	for _, b := range built {
		ref := b.Name + ":" + tag
		if err := p.ReplaceImage(b.Image, match.Annotation(RefNameAnnotation, ref),
			layout.WithAnnotations(map[string]string{RefNameAnnotation: ref})); err != nil {
			return fmt.Errorf("layout %s: %s: %w", dir, ref, err)
		}
	}
	return nil
}

// PushOptions configures Push.
type PushOptions struct {
	// Keychain finds the registry's credentials (default
	// authn.DefaultKeychain: ~/.docker/config.json and its helpers).
	Keychain authn.Keychain
	// Insecure talks plain HTTP to the registry. go-containerregistry does
	// so by itself for localhost and loopback addresses.
	Insecure bool
}

// DefaultPushOptions returns the options Push uses for fields left zero.
func DefaultPushOptions() PushOptions {
	return PushOptions{Keychain: authn.DefaultKeychain}
}

// Push pushes built to registry (host[:port][/path]) as
// images.Ref(registry, name, tag), and returns the references pushed.
func Push(ctx context.Context, registry, tag string, built []Built, o PushOptions) ([]string, error) {
	if o.Keychain == nil {
		o.Keychain = DefaultPushOptions().Keychain
	}
	var opts []name.Option
	if o.Insecure || isLoopback(registry) {
		opts = append(opts, name.Insecure)
	}
	var refs []string
	for _, b := range built {
		s := images.Ref(registry, b.Name, tag)
		ref, err := name.ParseReference(s, opts...)
		if err != nil {
			return refs, fmt.Errorf("push %s: %w", s, err)
		}
		if err := remote.Write(ref, b.Image, remote.WithContext(ctx), remote.WithAuthFromKeychain(o.Keychain)); err != nil {
			return refs, fmt.Errorf("push %s: %w", s, err)
		}
		refs = append(refs, s)
	}
	return refs, nil
}

// isLoopback reports whether registry's host is a loopback address or
// localhost.
func isLoopback(registry string) bool {
	host := registry
	host, _, _ = strings.Cut(host, "/")
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
