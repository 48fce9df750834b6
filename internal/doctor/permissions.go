package doctor

import (
	"slices"
	"strings"

	"github.com/pcsync/pcsync/pkg/render"
)

// Scope says where a Permission is needed.
type Scope string

// The scopes of a Permission.
const (
	// ScopeCluster: in every namespace (the watches across tenants, and
	// applying tenant objects in namespaces pcsync creates, which cannot
	// be granted per namespace in advance), or for a cluster-scoped
	// resource.
	ScopeCluster Scope = "cluster"
	// ScopeTenant: in tenant namespaces only, granted by each tenant's
	// RoleBinding pcsync (render.PcsyncRoleBindingName) to the ClusterRole
	// pcsync-tenant (render.PcsyncTenantClusterRole): checked in a tenant
	// namespace that exists.
	ScopeTenant Scope = "tenant"
	// ScopeOwnNamespace: in pcsync's own namespace only (the leader-election
	// namespace): the Lease, the ApplySet parent, the companies' statuses.
	ScopeOwnNamespace Scope = "own-namespace"
)

// Permission is one verb on one resource that pcsync uses.
type Permission struct {
	// Group is the API group ("" for core, "*" for every group).
	Group string
	// Resource is the resource, with "/subresource" where it applies ("*"
	// for every resource).
	Resource string
	// Name, when set, limits the permission to the object of that name
	// (RBAC resourceNames).
	Name string
	// Verb is the verb.
	Verb string
	// Scope is where it is needed.
	Scope Scope
	// Why is what pcsync uses it for.
	Why string
	// Optional permissions only degrade a feature when missing (a warning,
	// not a failure).
	Optional bool
	// CiliumOnly permissions are needed only when a company uses egress mode
	// cilium.
	CiliumOnly bool
}

// String is "verb group/resource", e.g. "patch networking.k8s.io/networkpolicies".
func (p Permission) String() string {
	g := p.Group
	if g == "" {
		g = "core"
	}
	s := p.Verb + " " + g + "/" + p.Resource
	if p.Name != "" {
		s += "/" + p.Name
	}
	return s
}

// DefaultPermissions lists every call pcsync makes, as deploy/base/rbac.yaml
// grants them (a test keeps the two in step): ScopeCluster ones by the
// ClusterRole pcsync, ScopeTenant ones by the ClusterRole pcsync-tenant
// that each tenant's RoleBinding pcsync binds, ScopeOwnNamespace ones by
// the Role pcsync.
func DefaultPermissions() []Permission {
	var out []Permission
	add := func(group string, resources, verbs []string, scope Scope, why string, mod func(*Permission)) {
		for _, r := range resources {
			for _, v := range verbs {
				p := Permission{Group: group, Resource: r, Verb: v, Scope: scope, Why: why}
				if mod != nil {
					mod(&p)
				}
				out = append(out, p)
			}
		}
	}
	applyVerbs := []string{"get", "list", "create", "patch", "delete"}
	// Namespaces are never deleted: prune retains a removed company's
	// emptied Namespace (deleting namespaces cannot be limited to tenants).
	add("", []string{"namespaces"}, []string{"get", "list", "create", "patch"}, ScopeCluster,
		"apply tenant Namespaces", nil)
	add("", []string{"serviceaccounts", "resourcequotas", "limitranges", "persistentvolumeclaims"},
		applyVerbs, ScopeCluster, "apply and prune tenant manifests", nil)
	add("rbac.authorization.k8s.io", []string{"roles", "rolebindings"}, applyVerbs, ScopeCluster,
		"apply and prune tenant manifests", nil)
	add("rbac.authorization.k8s.io", []string{"roles"}, []string{"bind"}, ScopeCluster,
		"binding the tenant Role while it is applied alongside", func(p *Permission) { p.Name = render.RoleName })
	add("rbac.authorization.k8s.io", []string{"clusterroles"}, []string{"bind"}, ScopeCluster,
		"granting itself the per-tenant rights in each tenant's RoleBinding "+render.PcsyncRoleBindingName,
		func(p *Permission) { p.Name = render.PcsyncTenantClusterRole })
	add("networking.k8s.io", []string{"networkpolicies"}, applyVerbs, ScopeCluster, "apply and prune tenant manifests", nil)
	add("", []string{"services"}, append(slices.Clone(applyVerbs), "watch"), ScopeCluster,
		"egress mode proxy: the egress proxy's Service, whose ClusterIP agents get", nil)
	add("apps", []string{"deployments"}, append(slices.Clone(applyVerbs), "watch"), ScopeCluster,
		"egress mode proxy: the egress proxy; its scaler watches every proxy", nil)
	add("apps", []string{"deployments/scale"}, []string{"patch"}, ScopeTenant,
		"egress mode proxy: scaling an idle company's proxy to zero and back (spec.egress.proxyIdleSec)", nil)
	add("cilium.io", []string{"ciliumnetworkpolicies"}, applyVerbs, ScopeCluster, "egress mode cilium",
		func(p *Permission) { p.CiliumOnly = true })
	// Secrets are created and deleted, never read, outside pcsync's own namespace.
	add("", []string{"secrets"}, []string{"create"}, ScopeTenant,
		"per-run Secrets; the dry-run checks that the Secrets the config names (doctor) and a run's credential Secrets (the daemon) exist", nil)
	add("", []string{"secrets"}, []string{"delete"}, ScopeTenant,
		"per-run Secrets, deleted once the run's result is written", nil)
	add("batch", []string{"jobs"}, []string{"get", "list", "watch"}, ScopeCluster, "watching agent runs", nil)
	add("batch", []string{"jobs"}, []string{"create", "delete"}, ScopeTenant, "agent runs", nil)
	add("", []string{"pods"}, []string{"get", "list", "watch"}, ScopeCluster, "agent runs; reading its own pod", nil)
	add("", []string{"pods/log"}, []string{"get"}, ScopeCluster, "agent logs; granted to tenants by their Role", nil)
	add("", []string{"events"}, []string{"list", "watch"}, ScopeCluster, "explaining runs the Job controller cannot start", nil)
	add("", []string{"pods"}, []string{"create", "delete", "patch"}, ScopeTenant, "sandbox leases (pcsync daemon --sandbox); patch claims a warm pool member", nil)
	add("", []string{"pods/exec"}, []string{"get", "create"}, ScopeTenant, "sandbox leases' command streams", nil)
	add("coordination.k8s.io", []string{"leases"}, []string{"get", "create", "update"}, ScopeOwnNamespace, "leader election (--leader-elect); the warm pools' Lease of the daemon's owner (--sandbox)", nil)
	add("", []string{"secrets"}, []string{"get", "create", "patch"}, ScopeOwnNamespace,
		"the ApplySet parent (--applyset, default pcsync)", func(p *Permission) { p.Name = "pcsync" })
	add("pcsync.io", []string{"companystatuses"}, []string{"list", "watch", "create", "patch", "delete"}, ScopeOwnNamespace,
		"each company's status (CompanyStatus), in the ApplySet's namespace", func(p *Permission) { p.Optional = true })
	add("pcsync.io", []string{"companystatuses/status"}, []string{"patch"}, ScopeOwnNamespace,
		"each company's status (CompanyStatus)", func(p *Permission) { p.Optional = true })
	add("", []string{"events"}, []string{"create", "patch"}, ScopeOwnNamespace,
		"Events on the companies' statuses", func(p *Permission) { p.Optional = true })
	add("authorization.k8s.io", []string{"selfsubjectaccessreviews"}, []string{"create"}, ScopeCluster, "pcsync doctor", nil)
	add("discovery.k8s.io", []string{"endpointslices"}, []string{"get"}, ScopeCluster,
		"the network check's API server target (EndpointSlice default/kubernetes)", func(p *Permission) {
			p.Name, p.Optional = "kubernetes", true
		})
	add("", []string{"nodes"}, []string{"get", "list"}, ScopeCluster,
		"the network check's kubelet target (the kubelet port each Node reports)", func(p *Permission) { p.Optional = true })
	return out
}

// splitResource splits "pods/log" into resource and subresource.
func splitResource(r string) (string, string) {
	res, sub, _ := strings.Cut(r, "/")
	return res, sub
}
