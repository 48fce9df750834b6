package apply

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
)

// Label and annotation keys of the ApplySet specification (KEP-3659), as kubectl reads
// and writes them.
const (
	// LabelApplySetID marks the parent object; its value is the set's ID.
	LabelApplySetID = "applyset.kubernetes.io/id"
	// LabelPartOf marks every member; its value is the set's ID.
	LabelPartOf = "applyset.kubernetes.io/part-of"
	// AnnotationTooling names the tool that manages the set: "<name>/<version>".
	AnnotationTooling = "applyset.kubernetes.io/tooling"
	// AnnotationContainsGroupKinds lists the members' kinds as "Kind.group" (or
	// "Kind" for the core group), sorted, comma-separated.
	AnnotationContainsGroupKinds = "applyset.kubernetes.io/contains-group-kinds"
	// AnnotationAdditionalNamespaces lists the namespaces of namespaced members other
	// than the parent's own, sorted, comma-separated.
	AnnotationAdditionalNamespaces = "applyset.kubernetes.io/additional-namespaces"
)

// ApplySetID returns the ApplySet ID of a parent object, computed as kubectl does:
// "applyset-" + base64url-without-padding(sha256("<name>.<namespace>.<kind>.<group>")) + "-v1".
func ApplySetID(name, namespace string, gk schema.GroupKind) string {
	sum := sha256.Sum256([]byte(strings.Join([]string{name, namespace, gk.Kind, gk.Group}, ".")))
	return "applyset-" + base64.RawURLEncoding.EncodeToString(sum[:]) + "-v1"
}

// secretGVR is the resource of the parent.
var secretGVR = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}

// inventory is the state of the parent object as read at the start of a verb.
type inventory struct {
	id     string
	parent ObjectRef
	// exists is false when the parent has not been created yet.
	exists bool
	// kinds and namespaces are the parent's current annotations, tooling its
	// tooling annotation.
	kinds      sets.Set[schema.GroupKind]
	namespaces sets.Set[string]
	tooling    string
	// approval is the parent's AnnotationApprovePrune.
	approval string
}

// parentRef returns the ref of the parent Secret.
func (m *Manager) parentRef() ObjectRef {
	return ObjectRef{Version: "v1", Kind: "Secret", Namespace: m.opts.ApplySet.Namespace, Name: m.opts.ApplySet.Name}
}

// applySetID returns this Manager's set ID.
func (m *Manager) applySetID() string {
	return ParentID(m.opts.ApplySet.Name, m.opts.ApplySet.Namespace)
}

// ParentID is the ApplySet ID of pcsync's parent, the Secret name in
// namespace: what names a deployment of pcsync on a cluster.
func ParentID(name, namespace string) string {
	return ApplySetID(name, namespace, schema.GroupKind{Kind: "Secret"})
}

// readInventory reads and checks the parent. A missing parent (or namespace) is an
// empty set; a parent of another tool or with another ID is refused.
func (m *Manager) readInventory(ctx context.Context) (*inventory, error) {
	inv := &inventory{
		id:         m.applySetID(),
		parent:     m.parentRef(),
		kinds:      sets.New[schema.GroupKind](),
		namespaces: sets.New[string](),
	}
	obj, err := m.dyn.Resource(secretGVR).Namespace(inv.parent.Namespace).Get(ctx, inv.parent.Name, getOptions())
	if apierrors.IsNotFound(err) {
		return inv, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading ApplySet parent %s: %w", inv.parent, err)
	}
	inv.exists = true
	if err := m.checkParent(inv, obj); err != nil {
		return nil, err
	}
	ann := obj.GetAnnotations()
	inv.tooling = ann[AnnotationTooling]
	inv.approval = ann[AnnotationApprovePrune]
	for _, s := range splitList(ann[AnnotationContainsGroupKinds]) {
		inv.kinds.Insert(schema.ParseGroupKind(s))
	}
	inv.namespaces.Insert(splitList(ann[AnnotationAdditionalNamespaces])...)
	return inv, nil
}

// checkParent refuses a parent that belongs to another tool or another set.
func (m *Manager) checkParent(inv *inventory, obj *unstructured.Unstructured) error {
	tooling, ok := obj.GetAnnotations()[AnnotationTooling]
	if !ok {
		return fmt.Errorf("ApplySet parent %s exists but has no %s annotation; refusing to adopt it",
			inv.parent, AnnotationTooling)
	}
	if name := toolingName(tooling); name != m.opts.ToolingName {
		return fmt.Errorf("ApplySet parent %s is managed by tooling %q, not %q; refusing to change it "+
			"(choose another --applyset name)", inv.parent, name, m.opts.ToolingName)
	}
	id, ok := obj.GetLabels()[LabelApplySetID]
	if !ok {
		return fmt.Errorf("ApplySet parent %s has no %s label", inv.parent, LabelApplySetID)
	}
	if id != inv.id {
		return fmt.Errorf("ApplySet parent %s has %s=%s, want %s", inv.parent, LabelApplySetID, id, inv.id)
	}
	if _, ok := obj.GetAnnotations()[AnnotationContainsGroupKinds]; !ok {
		return fmt.Errorf("ApplySet parent %s has no %s annotation", inv.parent, AnnotationContainsGroupKinds)
	}
	return nil
}

// toolingName is the tool part of a tooling annotation: everything before the last "/".
func toolingName(v string) string {
	if i := strings.LastIndex(v, "/"); i >= 0 {
		return v[:i]
	}
	return v
}

func splitList(s string) []string {
	if s == "" {
		return nil
	}
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// formatGroupKinds formats kinds as the contains-group-kinds annotation.
func formatGroupKinds(kinds sets.Set[schema.GroupKind]) string {
	out := make([]string, 0, len(kinds))
	for gk := range kinds {
		out = append(out, gk.String())
	}
	sort.Strings(out)
	return strings.Join(out, ",")
}

// formatNamespaces formats namespaces, without the parent's, as the
// additional-namespaces annotation.
func formatNamespaces(namespaces sets.Set[string], parentNamespace string) string {
	out := sets.List(namespaces.Clone().Delete(parentNamespace, ""))
	return strings.Join(out, ",")
}

// writeInventory makes the parent list exactly kinds and namespaces, creating the
// parent (and its namespace) if needed. It sends nothing when the parent already says
// so.
func (m *Manager) writeInventory(ctx context.Context, inv *inventory, kinds sets.Set[schema.GroupKind], namespaces sets.Set[string]) error {
	wantKinds := formatGroupKinds(kinds)
	wantNS := formatNamespaces(namespaces, inv.parent.Namespace)
	tooling := m.opts.ToolingName + "/" + m.opts.ToolVersion
	if inv.exists && inv.tooling == tooling && formatGroupKinds(inv.kinds) == wantKinds &&
		formatNamespaces(inv.namespaces, inv.parent.Namespace) == wantNS {
		return nil
	}
	if !inv.exists {
		if err := m.ensureNamespace(ctx, inv.parent.Namespace); err != nil {
			return err
		}
	}
	body := map[string]any{
		"apiVersion": "v1",
		"kind":       "Secret",
		"metadata": map[string]any{
			"name":      inv.parent.Name,
			"namespace": inv.parent.Namespace,
			"labels":    map[string]any{LabelApplySetID: inv.id},
			"annotations": map[string]any{
				AnnotationTooling:              tooling,
				AnnotationContainsGroupKinds:   wantKinds,
				AnnotationAdditionalNamespaces: wantNS,
			},
		},
	}
	data, err := json.Marshal(body)
	if err != nil {
		return fmt.Errorf("encoding ApplySet parent: %w", err)
	}
	mapping := restMappingFor(secretGVR, schema.GroupVersionKind{Version: "v1", Kind: "Secret"}, true)
	// The parent is ours alone: take its fields back if someone else touched them,
	// as kubectl does.
	if _, _, err := m.patchApply(ctx, mapping, inv.parent.Namespace, inv.parent.Name, data, m.opts.FieldManager+"-applyset", true, false); err != nil {
		return fmt.Errorf("updating ApplySet parent %s: %w", inv.parent, err)
	}
	inv.exists = true
	inv.tooling = tooling
	inv.kinds = kinds.Clone()
	inv.namespaces = namespaces.Clone().Delete(inv.parent.Namespace, "")
	return nil
}

// ensureNamespace creates namespace ns (server-side apply, not a member of the set) if
// it does not exist.
func (m *Manager) ensureNamespace(ctx context.Context, ns string) error {
	nsGVR := schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
	_, err := m.dyn.Resource(nsGVR).Get(ctx, ns, getOptions())
	if err == nil {
		return nil
	}
	if !apierrors.IsNotFound(err) {
		return fmt.Errorf("reading namespace %s of the ApplySet parent: %w", ns, err)
	}
	data, _ := json.Marshal(map[string]any{
		"apiVersion": "v1", "kind": "Namespace",
		"metadata": map[string]any{"name": ns, "labels": map[string]any{"app.kubernetes.io/managed-by": "pcsync"}},
	})
	mapping := restMappingFor(nsGVR, schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}, false)
	if _, _, err := m.patchApply(ctx, mapping, "", ns, data, m.opts.FieldManager, false, false); err != nil {
		return fmt.Errorf("creating namespace %s of the ApplySet parent: %w", ns, err)
	}
	m.log.Info("created the ApplySet parent's namespace", "namespace", ns)
	return nil
}

// sortedKinds returns kinds in a stable order.
func sortedKinds(kinds sets.Set[schema.GroupKind]) []schema.GroupKind {
	out := kinds.UnsortedList()
	slices.SortFunc(out, func(a, b schema.GroupKind) int { return strings.Compare(a.String(), b.String()) })
	return out
}
