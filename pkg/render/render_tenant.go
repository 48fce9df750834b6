package render

import (
	"maps"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/pcsync/pcsync/internal/lib/agentpod"
	"github.com/pcsync/pcsync/pkg/config"
)

// tenant holds what every object of one company needs.
type tenant struct {
	m  *config.Model
	c  *config.Company
	ns string
}

// labels are the labels every object of the company carries.
func (t tenant) labels() map[string]any {
	return map[string]any{agentpod.LabelManagedBy: agentpod.ManagedByValue, agentpod.LabelCompany: t.c.Metadata.Name}
}

// object starts an object of the company's namespace.
func (t tenant) object(apiVersion, kind, name string) map[string]any {
	return map[string]any{
		"apiVersion": apiVersion,
		"kind":       kind,
		"metadata": map[string]any{
			"name":      name,
			"namespace": t.ns,
			"labels":    t.labels(),
		},
	}
}

// objects builds the company's base objects, before patches.
func (t tenant) objects() []*unstructured.Unstructured {
	objs := []map[string]any{
		t.namespace(),
		t.serviceAccount(),
		t.role(),
		t.roleBinding(),
		t.pcsyncBinding(),
		t.quota(),
		t.limitRange(),
		t.denyAll(),
		t.egressAllow(),
	}
	objs = append(objs, t.egressProxyObjects()...)
	if cnp := t.egressFQDN(); cnp != nil {
		objs = append(objs, cnp)
	}
	if pvc := t.sessions(); pvc != nil {
		objs = append(objs, pvc)
	}
	out := make([]*unstructured.Unstructured, len(objs))
	for i, o := range objs {
		out[i] = &unstructured.Unstructured{Object: o}
	}
	return out
}

// namespace is the tenant Namespace. The company's own metadata labels and
// annotations go on it; pcsync's labels win over them.
func (t tenant) namespace() map[string]any {
	labels := map[string]any{}
	for k, v := range t.c.Metadata.Labels {
		labels[k] = v
	}
	maps.Copy(labels, t.labels())
	labels[agentpod.LabelCompanyID] = t.c.Spec.ID
	for _, mode := range []string{"enforce", "audit", "warn"} {
		labels["pod-security.kubernetes.io/"+mode] = PodSecurityLevel
	}
	md := map[string]any{"name": t.ns, "labels": labels}
	if len(t.c.Metadata.Annotations) > 0 {
		md["annotations"] = stringMap(t.c.Metadata.Annotations)
	}
	return map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": md}
}

// serviceAccount is the tenant ServiceAccount, with the company's
// annotations (IRSA, workload identity) and image pull secrets.
func (t tenant) serviceAccount() map[string]any {
	o := t.object("v1", "ServiceAccount", ServiceAccountName)
	if len(t.c.Spec.ServiceAccountAnnotations) > 0 {
		o["metadata"].(map[string]any)["annotations"] = stringMap(t.c.Spec.ServiceAccountAnnotations)
	}
	if secrets := t.m.ImagePullSecrets(t.c); len(secrets) > 0 {
		refs := make([]any, len(secrets))
		for i, s := range secrets {
			refs[i] = map[string]any{"name": s}
		}
		o["imagePullSecrets"] = refs
	}
	return o
}

// role lets the tenant ServiceAccount read pod logs, nothing else.
func (t tenant) role() map[string]any {
	o := t.object("rbac.authorization.k8s.io/v1", "Role", RoleName)
	o["rules"] = []any{map[string]any{
		"apiGroups": []any{""},
		"resources": []any{"pods/log"},
		"verbs":     []any{"get"},
	}}
	return o
}

func (t tenant) roleBinding() map[string]any {
	o := t.object("rbac.authorization.k8s.io/v1", "RoleBinding", RoleBindingName)
	o["roleRef"] = map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": RoleName}
	o["subjects"] = []any{map[string]any{"kind": "ServiceAccount", "name": ServiceAccountName, "namespace": t.ns}}
	return o
}

// pcsyncBinding grants pcsync's own ServiceAccount the ClusterRole of what
// it does in tenant namespaces (Jobs, Secrets, sandbox pods), in this
// namespace only. pcsync applies it holding bind on that ClusterRole, not
// its rules.
func (t tenant) pcsyncBinding() map[string]any {
	sa := t.m.Settings.Spec.Pcsync.ServiceAccount
	o := t.object("rbac.authorization.k8s.io/v1", "RoleBinding", PcsyncRoleBindingName)
	o["roleRef"] = map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": PcsyncTenantClusterRole}
	o["subjects"] = []any{map[string]any{"kind": "ServiceAccount", "name": sa.Name, "namespace": sa.Namespace}}
	return o
}

// quota is the tenant ResourceQuota from the effective quota.
func (t tenant) quota() map[string]any {
	q := t.m.Quota(t.c)
	hard := map[string]any{}
	if q.Pods != nil {
		hard["pods"] = itoa(*q.Pods)
	}
	setQuantity(hard, "requests.cpu", q.RequestsCPU)
	setQuantity(hard, "requests.memory", q.RequestsMemory)
	setQuantity(hard, "limits.cpu", q.LimitsCPU)
	setQuantity(hard, "limits.memory", q.LimitsMemory)
	setQuantity(hard, "limits.ephemeral-storage", q.LimitsEphemeralStorage)
	if q.PersistentVolumeClaims != nil {
		hard["persistentvolumeclaims"] = itoa(*q.PersistentVolumeClaims)
	}
	setQuantity(hard, "requests.storage", q.RequestsStorage)
	o := t.object("v1", "ResourceQuota", QuotaName)
	o["spec"] = map[string]any{"hard": hard}
	return o
}

// limitRange is the tenant container LimitRange from the effective values.
func (t tenant) limitRange() map[string]any {
	l := t.m.LimitRange(t.c)
	limit := map[string]any{"type": "Container"}
	for name, rl := range map[string]*config.ResourceList{"max": l.Max, "min": l.Min, "default": l.Default, "defaultRequest": l.DefaultRequest} {
		if r := resourceList(rl); r != nil {
			limit[name] = r
		}
	}
	o := t.object("v1", "LimitRange", LimitRangeName)
	o["spec"] = map[string]any{"limits": []any{limit}}
	return o
}

// sessions is the optional ReadWriteMany volume for agent sessions.
func (t tenant) sessions() map[string]any {
	s := t.c.Spec.Sessions
	if s == nil {
		return nil
	}
	spec := map[string]any{
		"accessModes": []any{"ReadWriteMany"},
		"resources":   map[string]any{"requests": map[string]any{"storage": string(s.Size)}},
	}
	if s.StorageClassName != "" {
		spec["storageClassName"] = s.StorageClassName
	}
	o := t.object("v1", "PersistentVolumeClaim", SessionsPVCName)
	o["spec"] = spec
	return o
}

func resourceList(rl *config.ResourceList) map[string]any {
	if rl == nil {
		return nil
	}
	out := map[string]any{}
	setQuantity(out, "cpu", rl.CPU)
	setQuantity(out, "memory", rl.Memory)
	setQuantity(out, "ephemeral-storage", rl.EphemeralStorage)
	if len(out) == 0 {
		return nil
	}
	return out
}

func setQuantity(m map[string]any, k string, q *config.Quantity) {
	if q != nil {
		m[k] = string(*q)
	}
}

func stringMap(m map[string]string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
