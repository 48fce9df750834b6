package companystatus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
)

// ErrNoCRD is wrapped by the calls below when the cluster does not serve
// CompanyStatus: its CRD is not installed.
var ErrNoCRD = errors.New("the cluster does not serve " + Resource + "." + Group +
	": install its CRD (deploy/base's companystatus-crd.yaml, or the Helm chart)")

// List returns the CompanyStatus objects of namespace ns ("": every
// namespace), sorted by namespace and name.
func List(ctx context.Context, dyn dynamic.Interface, ns string) ([]CompanyStatus, error) {
	l, err := dyn.Resource(GVR).Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, readError(err, ns, "")
	}
	out := make([]CompanyStatus, 0, len(l.Items))
	for i := range l.Items {
		cs, err := FromUnstructured(&l.Items[i])
		if err != nil {
			return nil, err
		}
		out = append(out, *cs)
	}
	slices.SortFunc(out, func(a, b CompanyStatus) int {
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	return out, nil
}

// Get returns the CompanyStatus ns/name.
func Get(ctx context.Context, dyn dynamic.Interface, ns, name string) (*CompanyStatus, error) {
	u, err := dyn.Resource(GVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, readError(err, ns, name)
	}
	return FromUnstructured(u)
}

// RequestReconcile sets AnnotationReconcileRequestedAt on ns/name to
// value (a merge patch, which the daemon's writes leave alone) and returns
// the object as patched.
func RequestReconcile(ctx context.Context, dyn dynamic.Interface, ns, name, value string) (*CompanyStatus, error) {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"annotations": map[string]string{AnnotationReconcileRequestedAt: value}}})
	if err != nil {
		return nil, err
	}
	u, err := dyn.Resource(GVR).Namespace(ns).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		return nil, readError(err, ns, name)
	}
	return FromUnstructured(u)
}

// WaitHandled watches ns/name until its status.lastHandledReconcileAt is
// value (a reconcile that began after the request ended) and returns it
// then; it returns ctx's error when ctx ends first.
func WaitHandled(ctx context.Context, dyn dynamic.Interface, ns, name, value string) (*CompanyStatus, error) {
	ri := dyn.Resource(GVR).Namespace(ns)
	sel := fields.OneTermEqualSelector("metadata.name", name).String()
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = sel
			return ri.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = sel
			return ri.Watch(ctx, o)
		},
	}
	var got *CompanyStatus
	_, err := watchtools.UntilWithSync(ctx, lw, &unstructured.Unstructured{}, nil, func(e watch.Event) (bool, error) {
		u, ok := e.Object.(*unstructured.Unstructured)
		if !ok || e.Type == watch.Deleted {
			return false, nil
		}
		cs, err := FromUnstructured(u)
		if err != nil {
			return false, err
		}
		got = cs
		return cs.Status.LastHandledReconcileAt == value, nil
	})
	if err != nil {
		if ctx.Err() != nil {
			err = ctx.Err() // the watch's own timeout error says less
		}
		return got, fmt.Errorf("%s %s/%s: %w", Kind, ns, name, err)
	}
	return got, nil
}

// readError names the object (or the namespace) an error of the API
// server is about, and ErrNoCRD when the resource is not served.
func readError(err error, ns, name string) error {
	what := Kind + " " + ns + "/" + name
	if name == "" {
		what = Resource + " in namespace " + ns
		if ns == "" {
			what = Resource
		}
	}
	// A resource not served is a NotFound too, with the server's generic
	// message instead of the object's name.
	var status apierrors.APIStatus
	if apierrors.IsNotFound(err) && errors.As(err, &status) &&
		(name == "" || strings.Contains(status.Status().Message, "could not find the requested resource")) {
		return fmt.Errorf("%s: %w", what, ErrNoCRD)
	}
	return fmt.Errorf("%s: %w", what, err)
}
