package secretcheck

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes"

	"github.com/pcsync/pcsync/pkg/adapters"
	"github.com/pcsync/pcsync/pkg/config"
)

// Options configure a Guard. Start from DefaultOptions.
type Options struct {
	// TTL is how long a Secret found to exist is trusted without a new
	// request. A missing one is never remembered: creating it fixes the
	// next run at once. Default 30 s.
	TTL time.Duration
}

// DefaultOptions returns the defaults described on Options.
func DefaultOptions() Options { return Options{TTL: 30 * time.Second} }

// complete fills zero or negative fields with their defaults.
func (o Options) complete() Options {
	if o.TTL < 0 {
		o.TTL = 0
	}
	o.TTL = cmp.Or(o.TTL, DefaultOptions().TTL)
	return o
}

// Guard checks that the Secrets of a run's credentials exist.
type Guard struct {
	cs   kubernetes.Interface
	opts Options

	mu   sync.Mutex
	keys map[string]*entry
}

type entry struct {
	mu    sync.Mutex // held during the request, so one request serves a burst
	found time.Time
}

// NewGuard returns a Guard that asks with cs.
func NewGuard(cs kubernetes.Interface, opts Options) *Guard {
	return &Guard{cs: cs, opts: opts.complete(), keys: map[string]*entry{}}
}

// Check returns nil when the Secret of every credential of company c that
// the CLI of adapter type t uses (config.Company.CredentialsUsedBy) exists
// in namespace ns, at once when there is none. It returns a *MissingError
// for the first one that does not exist, and the API server's error
// (wrapped, naming the Secret) when it cannot tell.
func (g *Guard) Check(ctx context.Context, ns string, c *config.Company, t adapters.Type) error {
	for _, cr := range c.CredentialsUsedBy(t) {
		err := g.exists(ctx, ns, cr.SecretRef.Name)
		switch {
		case apierrors.IsNotFound(err):
			return &MissingError{Company: c.Slug(), Credential: cr.Name, Namespace: ns,
				Secret: cr.SecretRef.Name, Key: cr.SecretRef.Key}
		case err != nil:
			return fmt.Errorf("credential %s/%s: %w", c.Slug(), cr.Name, err)
		}
	}
	return nil
}

// exists is Exists, trusting a Secret found to exist for the TTL.
func (g *Guard) exists(ctx context.Context, ns, name string) error {
	key := ns + "/" + name
	g.mu.Lock()
	e := g.keys[key]
	if e == nil {
		e = &entry{}
		g.keys[key] = e
	}
	g.mu.Unlock()
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.found.IsZero() && time.Since(e.found) < g.opts.TTL {
		return nil
	}
	err := Exists(ctx, g.cs, ns, name)
	if err == nil {
		e.found = time.Now()
	}
	return err
}

// IsMissing reports whether err is (or wraps) a *MissingError.
func IsMissing(err error) bool {
	var me *MissingError
	return errors.As(err, &me)
}
