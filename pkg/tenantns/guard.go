// Package tenantns confirms that a namespace is a company's tenant namespace
// before pcsync puts a workload in it (a run's Job and Secret, a sandbox
// lease's pod). pcsync apply never takes a namespace it did not create (see
// pkg/apply's ownership rule), so a company whose namespace is someone
// else's has no tenant manifests there; without this check the daemon would
// still start that company's agents in it.
package tenantns

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/pcsync/pcsync/internal/lib/agentpod"
)

// ErrNotTenant is matched (errors.Is) by Check's error for a namespace that
// exists and is not the company's tenant namespace.
var ErrNotTenant = errors.New("not the company's tenant namespace")

// DefaultTTL is how long a confirmed namespace is trusted without a new GET.
const DefaultTTL = time.Minute

// Guard checks namespaces, remembering each confirmation for a while so that
// a burst of runs of one company costs one GET.
type Guard struct {
	client kubernetes.Interface
	ttl    time.Duration

	mu   sync.Mutex
	keys map[string]*entry
}

type entry struct {
	mu        sync.Mutex // held during the GET, so one GET serves a burst
	confirmed time.Time
}

// New returns a Guard that reads namespaces with client and trusts a
// confirmation for ttl (DefaultTTL when 0).
func New(client kubernetes.Interface, ttl time.Duration) *Guard {
	if ttl <= 0 {
		ttl = DefaultTTL
	}
	return &Guard{client: client, ttl: ttl, keys: map[string]*entry{}}
}

// Check returns nil when namespace ns carries the company label of company
// (pcsync rendered it: applied by pcsync, or by a GitOps tool from pcsync
// render), or does not exist (the create that follows says so). It returns
// an error matching ErrNotTenant for an existing namespace without that
// label, naming it and what to do.
func (g *Guard) Check(ctx context.Context, ns, company string) error {
	g.mu.Lock()
	e := g.keys[ns+"/"+company]
	if e == nil {
		e = &entry{}
		g.keys[ns+"/"+company] = e
	}
	g.mu.Unlock()
	e.mu.Lock()
	defer e.mu.Unlock()
	if time.Since(e.confirmed) < g.ttl {
		return nil
	}
	n, err := g.client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return fmt.Errorf("Namespace/%s: reading it to check it is company %s's: %w", ns, company, err)
	}
	if err := Verify(ns, n.Labels, company); err != nil {
		return err
	}
	e.confirmed = time.Now()
	return nil
}

// Verify is Check's decision for a namespace with the given labels.
func Verify(ns string, labels map[string]string, company string) error {
	got, ok := labels[agentpod.LabelCompany]
	switch {
	case ok && got == company:
		return nil
	case ok:
		return fmt.Errorf("Namespace/%s is company %s's tenant namespace, not company %s's: %w", ns, got, company, ErrNotTenant)
	}
	return fmt.Errorf("Namespace/%s exists but is not company %s's tenant namespace (no label %s=%s): "+
		"pcsync apply leaves a namespace it did not create alone, so nothing of the company is there; "+
		"rename the company, or adopt the namespace on purpose (kubectl annotate namespace/%s pcsync.io/adopt=%s) and apply: %w",
		ns, company, agentpod.LabelCompany, company, ns, company, ErrNotTenant)
}
