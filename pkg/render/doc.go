// Package render turns a loaded config Model into tenant manifests: per
// company a Namespace, ServiceAccount, Role, RoleBinding, ResourceQuota,
// LimitRange, NetworkPolicies (in cilium mode a CiliumNetworkPolicy, in
// proxy mode the egress proxy's ServiceAccount, Deployment, Service and
// NetworkPolicy) and an optional sessions PVC, named and labelled as docs/design.md says. User
// patches (Settings spec.patches for every tenant, Company spec.patches for
// one) are applied by kustomize (krusty on an in-memory file system), so
// they behave exactly as in kustomize. Output is deterministic: the same
// Model gives the same bytes.
//
// Files, the simple path first:
//
//	render.go            Render and Options: build, patch, guard, sort; Output.YAML and JSON
//	cache.go             Cache: a company whose inputs did not change is not rendered again
//	render_tenant.go     the tenant's objects
//	render_network.go    its NetworkPolicies and CiliumNetworkPolicy
//	render_proxy.go      egress mode proxy: the egress proxy's objects and policy
//	render_proxy_credentials.go the proxy's credential route: its configuration, the keys' and the tokens' volumes
//	render_proxy_spend.go the proxy's --spend: the company's budgets and prices
//	egress_env.go        the hosts an agent's env implies
//	names.go             object names, labels and values
//	patch.go             the reference for patches: one kustomize run per company
//	guard.go             the tenant baseline guard, run after patches
//	writedir.go          render --output-dir: a file per company and a kustomization.yaml
//
// and the two fast paths, which stand in for kustomize and go-yaml and give
// the same bytes (Options.Reference turns both off; see package fastpath):
//
//	fastpath_batch.go    no kustomize without patches; batched kustomize runs of only
//	                     the objects patches can select
//	fastpath_yaml.go     the YAML writer: go-yaml's bytes, without its encoder's cost
package render
