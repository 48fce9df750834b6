package render

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/pcsync/pcsync/pkg/config"
)

// The tenant baseline guard
//
// Patches are kustomize patches: they can change anything in a tenant's
// objects, the hardening included. After a company's patches are applied
// (on either path: batched or the reference), the guard checks the
// invariants of the tenant baseline on the result (config.UnsafePatch
// names them; schema/common.cue #UnsafePatch says what each keeps and what
// allowing it risks). A company whose result breaks one that neither
// Settings nor the company lists in spec.allowUnsafePatches is refused
// with an error at the patch that broke it; an allowed one gives a warning
// there. The guard reads only the final objects, so both paths give the
// same verdict; which patch broke an invariant is found on the reference
// path (see culprit), and only when one is broken.

// violation is one broken invariant of the tenant baseline.
type violation struct {
	inv config.UnsafePatch
	// msg says what is wrong, naming the object.
	msg string
}

// checkBaseline returns the invariants that the patched objects got break,
// given the tenant's base objects (before patches), in a fixed order.
func (t tenant) checkBaseline(base, got []*unstructured.Unstructured) []violation {
	var out violations
	t.checkPodSecurity(&out, got)
	t.checkNetworkPolicy(&out, got)
	t.checkRBAC(&out, base, got)
	checkObjectIdentity(&out, base, got)
	return out
}

// violations collects the broken invariants in the order they are found.
type violations []violation

func (v *violations) add(inv config.UnsafePatch, format string, args ...any) {
	*v = append(*v, violation{inv: inv, msg: fmt.Sprintf(format, args...)})
}

func (t tenant) checkPodSecurity(out *violations, got []*unstructured.Unstructured) {
	// podSecurity: every Namespace among the objects, the tenant's first.
	nsFound := false
	for _, o := range got {
		if o.GetKind() != "Namespace" || o.GetAPIVersion() != "v1" {
			continue
		}
		if o.GetName() == t.ns {
			nsFound = true
		}
		labels := o.GetLabels()
		for _, mode := range []string{"enforce", "audit", "warn"} {
			k := "pod-security.kubernetes.io/" + mode
			if v, ok := labels[k]; !ok {
				out.add(config.UnsafePodSecurity, "Namespace %s: label %s is removed, want %q", o.GetName(), k, PodSecurityLevel)
			} else if v != PodSecurityLevel {
				out.add(config.UnsafePodSecurity, "Namespace %s: label %s is %q, want %q", o.GetName(), k, v, PodSecurityLevel)
			}
			if v, ok := labels[k+"-version"]; ok && v != "latest" {
				out.add(config.UnsafePodSecurity, "Namespace %s: label %s-version pins %q, want none or \"latest\"", o.GetName(), k, v)
			}
		}
	}
	if !nsFound {
		out.add(config.UnsafePodSecurity, "Namespace %s, which carries the Pod Security labels, is gone", t.ns)
	}
}

func (t tenant) checkNetworkPolicy(out *violations, got []*unstructured.Unstructured) {
	// networkPolicy: the deny-all policy, unchanged in what it selects and
	// denies.
	if np := find(got, "networking.k8s.io/v1", "NetworkPolicy", t.ns, DenyAllName); np == nil {
		out.add(config.UnsafeNetworkPolicy, "NetworkPolicy %s/%s, which denies all ingress and egress, is gone", t.ns, DenyAllName)
	} else if why := denyAllBroken(np); why != "" {
		out.add(config.UnsafeNetworkPolicy, "NetworkPolicy %s/%s %s", t.ns, DenyAllName, why)
	}
}

func (t tenant) checkRBAC(out *violations, base, got []*unstructured.Unstructured) {
	// rbac: the Role within the base Role's rules; the RoleBinding binds
	// that Role to ServiceAccounts of the tenant namespace only.
	baseRole := find(base, "rbac.authorization.k8s.io/v1", "Role", t.ns, RoleName)
	if r := find(got, "rbac.authorization.k8s.io/v1", "Role", t.ns, RoleName); r != nil && baseRole != nil {
		if why := ruleBeyond(baseRole, r); why != "" {
			out.add(config.UnsafeRBAC, "Role %s/%s %s", t.ns, RoleName, why)
		}
	}
	if rb := find(got, "rbac.authorization.k8s.io/v1", "RoleBinding", t.ns, RoleBindingName); rb != nil {
		// The tenant RoleBinding: the tenant Role, to ServiceAccounts of
		// the tenant namespace.
		sameNS := func(s map[string]any) bool { return s["kind"] == "ServiceAccount" && s["namespace"] == t.ns }
		if why := bindingBroken(rb, "Role", RoleName, sameNS, "a ServiceAccount of "+t.ns); why != "" {
			out.add(config.UnsafeRBAC, "RoleBinding %s/%s %s", t.ns, RoleBindingName, why)
		}
	}

	// rbac: pcsync's RoleBinding grants the per-tenant ClusterRole to
	// pcsync's ServiceAccount and nobody else (another subject would get
	// to create Jobs, Secrets and pods with exec in the namespace).
	if rb := find(got, "rbac.authorization.k8s.io/v1", "RoleBinding", t.ns, PcsyncRoleBindingName); rb != nil {
		sa := t.m.Settings.Spec.Pcsync.ServiceAccount
		isPcsync := func(s map[string]any) bool {
			return s["kind"] == "ServiceAccount" && s["name"] == sa.Name && s["namespace"] == sa.Namespace
		}
		want := fmt.Sprintf("pcsync's ServiceAccount %s/%s (Settings spec.pcsync.serviceAccount)", sa.Namespace, sa.Name)
		if why := bindingBroken(rb, "ClusterRole", PcsyncTenantClusterRole, isPcsync, want); why != "" {
			out.add(config.UnsafeRBAC, "RoleBinding %s/%s %s", t.ns, PcsyncRoleBindingName, why)
		}
	}
}

func checkObjectIdentity(out *violations, base, got []*unstructured.Unstructured) {
	// objectIdentity: the same objects, by apiVersion, kind, namespace and
	// name.
	want := map[objKey]bool{}
	for _, o := range base {
		want[keyOf(o)] = true
	}
	var gone, added []string
	have := map[objKey]bool{}
	for _, o := range got {
		k := keyOf(o)
		have[k] = true
		if !want[k] {
			added = append(added, describeKey(k))
		}
	}
	for _, o := range base {
		if k := keyOf(o); !have[k] {
			gone = append(gone, describeKey(k))
		}
	}
	if len(gone)+len(added) > 0 {
		slices.Sort(gone)
		slices.Sort(added)
		var parts []string
		if len(gone) > 0 {
			parts = append(parts, "removed or renamed: "+strings.Join(gone, ", "))
		}
		if len(added) > 0 {
			parts = append(parts, "not a tenant object: "+strings.Join(added, ", "))
		}
		out.add(config.UnsafeObjectIdentity, "%s", strings.Join(parts, "; "))
	}
}

// find returns the object of that apiVersion, kind, namespace and name.
func find(objs []*unstructured.Unstructured, apiVersion, kind, ns, name string) *unstructured.Unstructured {
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name && o.GetNamespace() == ns && o.GetAPIVersion() == apiVersion {
			return o
		}
	}
	return nil
}

func describeKey(k objKey) string {
	if k.ns == "" {
		return fmt.Sprintf("%s %s (%s)", k.kind, k.name, k.apiVersion)
	}
	return fmt.Sprintf("%s %s/%s (%s)", k.kind, k.ns, k.name, k.apiVersion)
}

// denyAllBroken says how a deny-all NetworkPolicy no longer selects every
// pod or no longer denies all ingress and egress; "" when it still does.
func denyAllBroken(np *unstructured.Unstructured) string {
	spec, _ := np.Object["spec"].(map[string]any)
	if sel, ok := spec["podSelector"].(map[string]any); !ok {
		return "has no podSelector {}, so it may not select every pod"
	} else if !emptySelector(sel) {
		return "selects only some pods (its podSelector must be {})"
	}
	types, _ := spec["policyTypes"].([]any)
	for _, want := range []string{"Ingress", "Egress"} {
		if !slices.Contains(types, any(want)) {
			return fmt.Sprintf("no longer lists %s in policyTypes, so it does not deny %s", want, strings.ToLower(want))
		}
	}
	for _, dir := range []string{"ingress", "egress"} {
		if rules, ok := spec[dir]; ok && rules != nil {
			if l, isList := rules.([]any); !isList || len(l) > 0 {
				return fmt.Sprintf("has %s rules, so it allows %s", dir, dir)
			}
		}
	}
	return ""
}

// emptySelector reports whether a label selector selects everything.
func emptySelector(sel map[string]any) bool {
	for _, k := range []string{"matchLabels", "matchExpressions"} {
		switch v := sel[k].(type) {
		case nil:
		case map[string]any:
			if len(v) > 0 {
				return false
			}
		case []any:
			if len(v) > 0 {
				return false
			}
		default:
			return false
		}
	}
	for k := range sel {
		if k != "matchLabels" && k != "matchExpressions" {
			return false
		}
	}
	return true
}

// ruleBeyond says how a Role grants more than the base Role: a rule is
// within the base when some base rule covers each of its API groups,
// resources and verbs (never by "*"), and it has no resourceNames-free
// widening such as nonResourceURLs; "" when all are within.
func ruleBeyond(base, got *unstructured.Unstructured) string {
	baseRules, _ := base.Object["rules"].([]any)
	rules, ok := got.Object["rules"].([]any)
	if !ok && got.Object["rules"] != nil {
		return "has rules that are not a list"
	}
	if got.Object["aggregationRule"] != nil {
		return "has an aggregationRule"
	}
	for i, r := range rules {
		rm, _ := r.(map[string]any)
		if rm == nil {
			return fmt.Sprintf("rule %d is not a rule", i)
		}
		if u := strList(rm["nonResourceURLs"]); len(u) > 0 {
			return fmt.Sprintf("rule %d grants nonResourceURLs %v", i, u)
		}
		covered := false
		for _, b := range baseRules {
			bm, _ := b.(map[string]any)
			if bm != nil && within(rm, bm, "apiGroups") && within(rm, bm, "resources") && within(rm, bm, "verbs") {
				covered = true
				break
			}
		}
		if !covered {
			return fmt.Sprintf("rule %d grants %v on %v in API groups %v, beyond the baseline (%s)",
				i, strList(rm["verbs"]), strList(rm["resources"]), quoteGroups(strList(rm["apiGroups"])), describeRules(baseRules))
		}
	}
	return ""
}

// within reports whether every value of rule r's field is among base's,
// and none is "*".
func within(r, base map[string]any, field string) bool {
	bs := strList(base[field])
	for _, v := range strList(r[field]) {
		if v == "*" || !slices.Contains(bs, v) {
			return false
		}
	}
	_, isList := r[field].([]any)
	return isList || r[field] == nil
}

func strList(v any) []string {
	l, _ := v.([]any)
	out := make([]string, 0, len(l))
	for _, e := range l {
		out = append(out, fmt.Sprint(e))
	}
	return out
}

func quoteGroups(gs []string) []string {
	out := make([]string, len(gs))
	for i, g := range gs {
		out[i] = fmt.Sprintf("%q", g)
	}
	return out
}

func describeRules(rules []any) string {
	var parts []string
	for _, r := range rules {
		rm, _ := r.(map[string]any)
		parts = append(parts, strings.Join(strList(rm["verbs"]), ",")+" "+strings.Join(strList(rm["resources"]), ","))
	}
	return strings.Join(parts, "; ")
}

// bindingBroken says how a RoleBinding binds something other than the
// roleKind roleName, or to a subject that ok refuses (want says what ok
// accepts); "" when it does not.
func bindingBroken(rb *unstructured.Unstructured, roleKind, roleName string, ok func(subject map[string]any) bool, want string) string {
	ref, _ := rb.Object["roleRef"].(map[string]any)
	if ref["apiGroup"] != "rbac.authorization.k8s.io" || ref["kind"] != roleKind || ref["name"] != roleName {
		return fmt.Sprintf("binds %v %v, not %s %s", ref["kind"], ref["name"], roleKind, roleName)
	}
	subjects, _ := rb.Object["subjects"].([]any)
	for i, s := range subjects {
		sm, _ := s.(map[string]any)
		if !ok(sm) {
			return fmt.Sprintf("subject %d (%s) is not %s", i, describeSubject(sm), want)
		}
	}
	return ""
}

// describeSubject is a RoleBinding subject as "kind name [of namespace ns]".
func describeSubject(s map[string]any) string {
	who := fmt.Sprintf("%v %v", s["kind"], s["name"])
	if ns, ok := s["namespace"].(string); ok && ns != "" {
		who += " of namespace " + ns
	}
	return who
}

// guardCompany checks a patched company against its baseline. It returns
// an error at the patch that broke each invariant the company does not
// allow, and a warning at the patch that broke each one it allows.
func guardCompany(yw *yamlWriter, m *config.Model, c *config.Company, t tenant, base, got []*unstructured.Unstructured) ([]config.Warning, error) {
	vs := t.checkBaseline(base, got)
	if len(vs) == 0 {
		return nil, nil
	}
	patches := allPatches(m, c)
	allowed := m.AllowedUnsafePatches(c)
	var warns []config.Warning
	var errs config.Errors
	for _, v := range vs {
		p := patches[culprit(yw, t, base, patches, v)]
		if slices.Contains(allowed, v.inv) {
			warns = append(warns, config.Warning{Pos: p.patch.Source, Field: p.field, Message: fmt.Sprintf(
				"company %q: patch %d weakens the tenant's %s (allowed by spec.allowUnsafePatches): %s", c.Metadata.Name, p.index, v.inv, v.msg)})
			continue
		}
		errs.List = append(errs.List, &config.Error{Pos: p.patch.Source, Field: p.field, Message: fmt.Sprintf(
			"company %q: patch %d breaks the tenant's %s: %s; to accept that risk, list %s in the company's (or Settings') spec.allowUnsafePatches",
			c.Metadata.Name, p.index, v.inv, v.msg, v.inv)})
	}
	if len(errs.List) > 0 {
		return warns, &errs
	}
	return warns, nil
}

// culprit finds the patch that brought violation v: the last patch before
// which the reference path's result (the patches so far) does not have it.
// Without patches there is none (the base objects keep the baseline).
func culprit(yw *yamlWriter, t tenant, base []*unstructured.Unstructured, patches []patchRef, v violation) int {
	for k := len(patches) - 1; k >= 1; k-- {
		got, err := kustomize(yw, t.ns, base, patches[:k])
		if err != nil || !slices.Contains(t.checkBaseline(base, got), v) {
			return k
		}
	}
	return 0
}

// allPatches are the patches of a company in the order kustomize applies
// them: Settings' first, then the company's.
func allPatches(m *config.Model, c *config.Company) []patchRef {
	var patches []patchRef
	for i, p := range m.Settings.Spec.Patches {
		patches = append(patches, patchRef{patch: p, field: fmt.Sprintf("spec.patches[%d]", i), index: i})
	}
	return append(patches, companyPatches(c)...)
}
