package render

import "github.com/pcsync/pcsync/pkg/egressproxy/allow"

// Names and values of the tenant manifests; kept compatible with
// Paperclip's Kubernetes provider. Their labels are package agentpod's,
// which the agent pods carry too.
const (
	// ServiceAccountName is the tenant ServiceAccount that agent pods run as.
	ServiceAccountName = "paperclip-tenant-sa"
	// RoleName is the tenant Role: get on pods/log only.
	RoleName = "paperclip-tenant-role"
	// RoleBindingName binds RoleName to ServiceAccountName.
	RoleBindingName = "paperclip-tenant-rb"
	// PcsyncRoleBindingName is the RoleBinding of each tenant namespace that
	// grants pcsync's ServiceAccount (Settings spec.pcsync.serviceAccount)
	// the ClusterRole PcsyncTenantClusterRole there.
	PcsyncRoleBindingName = "pcsync"
	// PcsyncTenantClusterRole is the ClusterRole (deploy/base/rbac.yaml)
	// of what pcsync does in tenant namespaces only: create agent Jobs and
	// their Secrets, sandbox pods and their exec streams, delete Jobs and
	// pods.
	PcsyncTenantClusterRole = "pcsync-tenant"
	// QuotaName is the tenant ResourceQuota.
	QuotaName = "paperclip-quota"
	// LimitRangeName is the tenant container LimitRange.
	LimitRangeName = "paperclip-limits"
	// DenyAllName is the NetworkPolicy that denies all ingress and egress.
	DenyAllName = "paperclip-deny-all"
	// EgressAllowName is the NetworkPolicy that allows agent egress.
	EgressAllowName = "paperclip-egress-allow"
	// EgressFQDNName is the CiliumNetworkPolicy that allows agent egress to
	// host names (cilium mode).
	EgressFQDNName = "paperclip-egress-fqdn"
	// EgressProxyName names the egress proxy's ServiceAccount,
	// Deployment, Service and NetworkPolicy (egress mode proxy).
	EgressProxyName = allow.ProxyName
	// SessionsPVCName is the ReadWriteMany volume for agent sessions.
	SessionsPVCName = "paperclip-sessions"

	// PodSecurityLevel is the Pod Security Standard enforced, audited and
	// warned on in every tenant namespace.
	PodSecurityLevel = "restricted"
)

// publicIPv4Except are the ranges left out of "public IPv4" when FQDNs are
// wanted in standard mode: this-network, private, shared (CGNAT),
// loopback, link-local (cloud metadata) and multicast.
var publicIPv4Except = []string{
	"0.0.0.0/8",
	"10.0.0.0/8",
	"100.64.0.0/10",
	"127.0.0.0/8",
	"169.254.0.0/16",
	"172.16.0.0/12",
	"192.168.0.0/16",
	"224.0.0.0/4",
}
