package agentenv

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/pcsync/pcsync/pkg/egressproxy/allow"
)

// ErrNoProxy is matched (errors.Is) by ClusterIP's error when a tenant
// has no egress proxy Service (yet).
var ErrNoProxy = errors.New("the tenant has no egress proxy Service: the tenant is not applied (egress mode proxy; run pcsync apply, or let the daemon reconcile)")

// Addresses knows the ClusterIP of every tenant's egress proxy Service,
// from one watch of the Services named allow.ProxyName across namespaces.
type Addresses struct {
	factory informers.SharedInformerFactory
	synced  cache.InformerSynced
	lister  corelisters.ServiceLister
}

// NewAddresses builds the watch (not started).
func NewAddresses(client kubernetes.Interface) *Addresses {
	f := informers.NewSharedInformerFactoryWithOptions(client, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", allow.ProxyName).String()
		}))
	inf := f.Core().V1().Services()
	a := &Addresses{factory: f, synced: inf.Informer().HasSynced, lister: inf.Lister()}
	// Keep only what ClusterIP reads.
	_ = inf.Informer().SetTransform(func(obj any) (any, error) {
		if s, ok := obj.(*corev1.Service); ok {
			return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: s.Name, Namespace: s.Namespace},
				Spec: corev1.ServiceSpec{ClusterIP: s.Spec.ClusterIP}}, nil
		}
		return obj, nil
	})
	return a
}

// Start starts the watch and waits up to timeout for its first list; it
// runs until ctx ends.
func (a *Addresses) Start(ctx context.Context, timeout time.Duration) error {
	a.factory.Start(ctx.Done())
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if !cache.WaitForCacheSync(wctx.Done(), a.synced) {
		return fmt.Errorf("egress proxy Services: the watch did not sync within %s", timeout)
	}
	return nil
}

// Wait returns once the watch Start started has ended, after Start's
// context ended.
func (a *Addresses) Wait() { a.factory.Shutdown() }

// ClusterIP is the address of namespace ns's egress proxy Service.
func (a *Addresses) ClusterIP(ns string) (string, error) {
	s, err := a.lister.Services(ns).Get(allow.ProxyName)
	switch {
	case apierrors.IsNotFound(err):
		return "", fmt.Errorf("Service/%s/%s: %w", ns, allow.ProxyName, ErrNoProxy)
	case err != nil:
		return "", fmt.Errorf("Service/%s/%s: %w", ns, allow.ProxyName, err)
	case s.Spec.ClusterIP == "" || s.Spec.ClusterIP == corev1.ClusterIPNone:
		return "", fmt.Errorf("Service/%s/%s: no ClusterIP", ns, allow.ProxyName)
	}
	return s.Spec.ClusterIP, nil
}
