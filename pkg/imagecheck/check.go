package imagecheck

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

// Status says what a registry answered for an image.
type Status string

const (
	// StatusFound: the registry has the image.
	StatusFound Status = "found"
	// StatusMissing: the registry answered that it has no such image or tag.
	StatusMissing Status = "missing"
	// StatusDenied: the registry wants credentials the pull secrets do not
	// give, or refused them.
	StatusDenied Status = "denied"
	// StatusUnreachable: no answer from the registry (DNS, connection,
	// TLS, timeout) or an answer that is not the registry protocol.
	StatusUnreachable Status = "unreachable"
	// StatusInvalid: the reference cannot be parsed, or names no registry.
	StatusInvalid Status = "invalid"
)

// Options configure Check.
type Options struct {
	// Keychain gives credentials per registry; nil means anonymous.
	Keychain authn.Keychain
	// Timeout bounds each image's check. Zero or negative: 10s.
	Timeout time.Duration
	// Concurrency is how many images are checked at once. Zero or
	// negative: 4.
	Concurrency int
	// Transport carries the requests. Default remote.DefaultTransport.
	Transport http.RoundTripper
}

// DefaultOptions returns the defaults of Options.
func DefaultOptions() Options {
	return Options{Keychain: &Keychain{}, Timeout: 10 * time.Second, Concurrency: 4, Transport: remote.DefaultTransport}
}

func (o *Options) complete() {
	d := DefaultOptions()
	if o.Keychain == nil {
		o.Keychain = d.Keychain
	}
	o.Timeout = cmp.Or(max(o.Timeout, 0), d.Timeout)
	o.Concurrency = cmp.Or(max(o.Concurrency, 0), d.Concurrency)
	if o.Transport == nil {
		o.Transport = d.Transport
	}
}

// Result is what Check found out about one image.
type Result struct {
	// Image is the reference as given.
	Image string
	// Status is the registry's answer.
	Status Status
	// Digest is the manifest's digest, when found.
	Digest string
	// Detail is the registry's own words (or the network's), for a status
	// other than found. It never holds a credential.
	Detail string
}

// OK reports whether the image exists.
func (r Result) OK() bool { return r.Status == StatusFound }

// String is one line: the image, what was found, and the registry's words.
func (r Result) String() string {
	if r.OK() {
		return fmt.Sprintf("%s: found (%s)", r.Image, r.Digest)
	}
	return fmt.Sprintf("%s: %s: %s", r.Image, r.Status, r.Detail)
}

// Check asks the registry of each image whether it has it, and returns the
// results in the order given; an image named twice is checked once.
func Check(ctx context.Context, images []string, opts Options) []Result {
	opts.complete()
	found := map[string]*Result{}
	sem := make(chan struct{}, opts.Concurrency)
	var wg sync.WaitGroup
	for _, img := range images {
		if _, ok := found[img]; ok {
			continue
		}
		r := &Result{}
		found[img] = r
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			*r = checkOne(ctx, img, opts)
		}()
	}
	wg.Wait()
	out := make([]Result, len(images))
	for i, img := range images {
		out[i] = *found[img]
	}
	return out
}

// checkOne sends one HEAD for the image's manifest.
func checkOne(ctx context.Context, image string, opts Options) Result {
	res := Result{Image: image}
	ref, err := name.ParseReference(image, name.StrictValidation)
	if err != nil {
		res.Status, res.Detail = StatusInvalid, err.Error()
		return res
	}
	ctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	desc, err := remote.Head(ref,
		remote.WithContext(ctx),
		remote.WithAuthFromKeychain(opts.Keychain),
		remote.WithTransport(opts.Transport),
		remote.WithRetryBackoff(remote.Backoff{Duration: 200 * time.Millisecond, Factor: 2, Steps: 2}),
	)
	if err == nil {
		res.Status, res.Digest = StatusFound, desc.Digest.String()
		return res
	}
	res.Status, res.Detail = classify(err)
	return res
}

// classify turns a registry client error into a status and the registry's
// words. A HEAD answer has no body, so the HTTP status decides.
func classify(err error) (Status, string) {
	var te *transport.Error
	if errors.As(err, &te) {
		detail := fmt.Sprintf("the registry answered %d %s", te.StatusCode, http.StatusText(te.StatusCode))
		if len(te.Errors) > 0 {
			detail += ": " + te.Errors[0].String()
		}
		switch te.StatusCode {
		case http.StatusNotFound:
			return StatusMissing, detail
		case http.StatusUnauthorized, http.StatusForbidden:
			return StatusDenied, detail
		}
		return StatusUnreachable, detail
	}
	return StatusUnreachable, err.Error()
}
