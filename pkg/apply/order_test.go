package apply

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
)

// TestApplyInOrder: a namespaced object is sent after its own Namespace and after
// every other cluster-scoped object, but does not wait for another tenant's
// Namespace: the API server below holds the slow tenant's Namespace until it has
// seen an object of the fast tenant (or 30 s, and the test fails).
func TestApplyInOrder(t *testing.T) {
	var (
		mu      sync.Mutex
		events  []string // "start <path>" and "end <path>", in order
		fastRef = make(chan struct{})
		once    sync.Once
	)
	record := func(e string) {
		mu.Lock()
		events = append(events, e)
		mu.Unlock()
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		record("start " + r.URL.Path)
		if strings.HasPrefix(r.URL.Path, "/api/v1/namespaces/fast/") {
			once.Do(func() { close(fastRef) })
		}
		if r.URL.Path == "/api/v1/namespaces/slow" {
			select {
			case <-fastRef:
			case <-time.After(30 * time.Second):
			}
		}
		record("end " + r.URL.Path)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write(body)
	}))
	defer srv.Close()
	opts := DefaultManagerOptions()
	opts.Workers = 4
	m, err := NewManager(&rest.Config{Host: srv.URL}, opts)
	if err != nil {
		t.Fatal(err)
	}

	nsMapping := restMappingFor(schema.GroupVersionResource{Version: "v1", Resource: "namespaces"},
		schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}, false)
	crMapping := restMappingFor(schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles"},
		schema.GroupVersionKind{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRole"}, false)
	cmMapping := restMappingFor(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"},
		schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, true)
	var objs []*unstructured.Unstructured
	add := func(apiVersion, kind, ns, name string) {
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": apiVersion, "kind": kind,
			"metadata": map[string]any{"name": name}}}
		if ns != "" {
			u.SetNamespace(ns)
		}
		objs = append(objs, u)
	}
	add("v1", "Namespace", "", "slow")
	add("v1", "Namespace", "", "fast")
	add("rbac.authorization.k8s.io/v1", "ClusterRole", "", "reader")
	for _, ns := range []string{"slow", "fast"} {
		for _, name := range []string{"a", "b", "c"} {
			add("v1", "ConfigMap", ns, name)
		}
	}
	desired, err := prepare(objs, m.applySetID(), 2)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range desired {
		switch d.ref.Kind {
		case "Namespace":
			d.mapping = nsMapping
		case "ClusterRole":
			d.mapping = crMapping
		default:
			d.mapping = cmMapping
		}
	}
	stages := byStage(desired)
	results := make([]Change, len(objs))
	m.applyInOrder(context.Background(), stages[stageClusterScoped], stages[stageNamespaced],
		m.newLiveIndex(m.applySetID(), nil), desired, DefaultApplyOptions(), results)

	for _, r := range results {
		if r.Action != ActionCreated {
			t.Errorf("%s: %s %v, want created", r.Ref, r.Action, r.Err)
		}
	}
	at := map[string]int{}
	for i, e := range events {
		at[e] = i
	}
	for _, ns := range []string{"slow", "fast"} {
		for _, name := range []string{"a", "b", "c"} {
			start := at["start /api/v1/namespaces/"+ns+"/configmaps/"+name]
			if nsEnd := at["end /api/v1/namespaces/"+ns]; start < nsEnd {
				t.Errorf("ConfigMap %s/%s sent before its Namespace was applied", ns, name)
			}
			if crEnd := at["end /apis/rbac.authorization.k8s.io/v1/clusterroles/reader"]; start < crEnd {
				t.Errorf("ConfigMap %s/%s sent before the ClusterRole was applied", ns, name)
			}
		}
	}
	first := len(events)
	for _, name := range []string{"a", "b", "c"} {
		first = min(first, at["start /api/v1/namespaces/fast/configmaps/"+name])
	}
	if diff := cmp.Diff(true, first < at["end /api/v1/namespaces/slow"]); diff != "" {
		t.Errorf("the fast tenant waited for the slow tenant's Namespace (-want +got):\n%s\nevents: %q", diff, events)
	}
}
