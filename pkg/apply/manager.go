package apply

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"

	"github.com/pcsync/pcsync/internal/lib/kube"
)

// Manager applies, diffs and prunes sets of objects in one cluster, keeping one
// ApplySet inventory. It is safe for concurrent use, but two Applies of the same
// ApplySet must not overlap (each rewrites the parent), and request counts in reports
// are only exact when calls do not overlap. A long-lived Manager (the daemon) keeps
// its discovery cache and re-reads it when a kind is missing.
type Manager struct {
	opts    ManagerOptions
	log     *slog.Logger
	rc      rest.Interface
	dyn     dynamic.Interface
	disc    discovery.CachedDiscoveryInterface
	mapper  meta.ResettableRESTMapper
	counter *kube.RequestCounter
}

// NewManager returns a Manager for the cluster of cfg. A cfg without a rate limiter and
// without QPS gets pcsync's default client limits (kube.DefaultFlags) instead of
// client-go's 5 requests per second.
func NewManager(cfg *rest.Config, opts ManagerOptions) (*Manager, error) {
	opts.complete()
	cfg = rest.CopyConfig(cfg)
	if cfg.RateLimiter == nil && cfg.QPS == 0 {
		kube.DefaultFlags().ConfigureRateLimits(cfg)
	}
	cfg.WarningHandler = warningLogger{opts.Logger}
	counter := &kube.RequestCounter{}
	counter.Instrument(cfg)
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("building the HTTP client: %w", err)
	}
	rc, err := rest.UnversionedRESTClientForConfigAndClient(dynamic.ConfigFor(cfg), httpClient)
	if err != nil {
		return nil, fmt.Errorf("building the REST client: %w", err)
	}
	disc, err := discovery.NewDiscoveryClientForConfigAndClient(cfg, httpClient)
	if err != nil {
		return nil, fmt.Errorf("building the discovery client: %w", err)
	}
	cached := memory.NewMemCacheClient(disc)
	return &Manager{
		opts:    opts,
		log:     opts.Logger,
		rc:      rc,
		dyn:     dynamic.New(rc),
		disc:    cached,
		mapper:  restmapper.NewDeferredDiscoveryRESTMapper(cached),
		counter: counter,
	}, nil
}

// warningLogger sends the API server's warnings (deprecated APIs, …) to the logger.
type warningLogger struct{ log *slog.Logger }

func (w warningLogger) HandleWarningHeader(code int, agent, text string) {
	if code == 299 && text != "" {
		w.log.Warn("API server warning", "warning", text)
	}
}

// ApplySetID returns the ID of the Manager's inventory (the value of the
// applyset.kubernetes.io/part-of label on every member).
func (m *Manager) ApplySetID() string { return m.applySetID() }

// FieldManager returns the field manager the Manager applies with.
func (m *Manager) FieldManager() string { return m.opts.FieldManager }

// Requests returns the mutating and read requests the Manager has sent so far.
func (m *Manager) Requests() (mutating, reads int64) {
	return m.counter.Mutations(), m.counter.Reads()
}

// restMappingFor builds a mapping for a resource pcsync knows without discovery.
func restMappingFor(gvr schema.GroupVersionResource, gvk schema.GroupVersionKind, namespaced bool) *meta.RESTMapping {
	scope := meta.RESTScopeRoot
	if namespaced {
		scope = meta.RESTScopeNamespace
	}
	return &meta.RESTMapping{Resource: gvr, GroupVersionKind: gvk, Scope: scope}
}

func namespaced(m *meta.RESTMapping) bool { return m.Scope.Name() == meta.RESTScopeNameNamespace }

// resourcePath is the URL path of a resource collection or object.
func resourcePath(gvr schema.GroupVersionResource, namespace, name string) []string {
	var p []string
	if gvr.Group == "" {
		p = append(p, "api", gvr.Version)
	} else {
		p = append(p, "apis", gvr.Group, gvr.Version)
	}
	if namespace != "" {
		p = append(p, "namespaces", namespace)
	}
	p = append(p, gvr.Resource)
	if name != "" {
		p = append(p, name)
	}
	return p
}

// patchApply sends a server-side apply request and returns the resulting object and
// whether the server created it (HTTP 201).
func (m *Manager) patchApply(ctx context.Context, mapping *meta.RESTMapping, namespace, name string, body []byte,
	fieldManager string, force, dryRun bool) (*unstructured.Unstructured, bool, error) {
	req := m.rc.Patch(types.ApplyPatchType).
		AbsPath(resourcePath(mapping.Resource, namespace, name)...).
		Param("fieldManager", fieldManager).
		Body(body)
	if force {
		req = req.Param("force", "true")
	}
	if dryRun {
		req = req.Param("dryRun", metav1.DryRunAll)
	}
	var code int
	res := req.Do(ctx).StatusCode(&code)
	if err := res.Error(); err != nil {
		return nil, false, err // Error (unlike Raw) decodes the server's Status
	}
	raw, err := res.Raw()
	if err != nil {
		return nil, false, err
	}
	// Decoded as a LIST's items are (integers as int64, not encoding/json's
	// float64), so that sameObject compares like with like.
	out := &unstructured.Unstructured{}
	if err := out.UnmarshalJSON(raw); err != nil {
		return nil, false, fmt.Errorf("decoding the server's answer: %w", err)
	}
	return out, code == http.StatusCreated, nil
}

// listAll lists every object of a resource with the given label selector, page by
// page, in all namespaces (namespace "") or one.
func (m *Manager) listAll(ctx context.Context, gvr schema.GroupVersionResource, namespace, selector string) ([]unstructured.Unstructured, error) {
	var items []unstructured.Unstructured
	opts := metav1.ListOptions{LabelSelector: selector, Limit: 500}
	for {
		var (
			list *unstructured.UnstructuredList
			err  error
		)
		if namespace == "" {
			list, err = m.dyn.Resource(gvr).List(ctx, opts)
		} else {
			list, err = m.dyn.Resource(gvr).Namespace(namespace).List(ctx, opts)
		}
		if err != nil {
			return nil, err
		}
		items = append(items, list.Items...)
		if list.GetContinue() == "" {
			return items, nil
		}
		opts.Continue = list.GetContinue()
	}
}

// deleteObject deletes one object, only if it still has the given UID.
func (m *Manager) deleteObject(ctx context.Context, mapping *meta.RESTMapping, namespace, name string, uid types.UID, dryRun bool) error {
	prop := metav1.DeletePropagationBackground
	opts := metav1.DeleteOptions{PropagationPolicy: &prop}
	if uid != "" {
		opts.Preconditions = &metav1.Preconditions{UID: &uid}
	}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	if namespace == "" {
		return m.dyn.Resource(mapping.Resource).Delete(ctx, name, opts)
	}
	return m.dyn.Resource(mapping.Resource).Namespace(namespace).Delete(ctx, name, opts)
}

func getOptions() metav1.GetOptions { return metav1.GetOptions{} }
