// Package render turns a loaded config Model into tenant manifests: per
// company a Namespace, ServiceAccount, Role, RoleBinding, ResourceQuota,
// LimitRange, NetworkPolicies (and in cilium mode a CiliumNetworkPolicy)
// and an optional sessions PVC, named and labelled as docs/design.md says. User
// patches (Settings spec.patches for every tenant, Company spec.patches for
// one) are applied by kustomize (krusty on an in-memory file system), so
// they behave exactly as in kustomize. Output is deterministic: the same
// Model gives the same bytes.
package render
