package agentpod

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// Label keys and values that pcsync puts on the objects it renders (every
// tenant object) and on the agent pods it makes (run Jobs, their pods and
// Secrets, sandbox lease pods and warm pool members). The paperclip.io keys
// are those of Paperclip's Kubernetes provider. The tenant's
// NetworkPolicies select agent pods by LabelRole=RoleAgent and the egress
// proxy's by LabelRole=RoleEgressProxy and LabelCompany: a key changed here
// changes both sides at once.
const (
	// LabelManagedBy marks every object pcsync renders or makes.
	LabelManagedBy = "app.kubernetes.io/managed-by"
	// ManagedByValue is the value of LabelManagedBy.
	ManagedByValue = "pcsync"

	// LabelCompany is the company slug, on every rendered object (the
	// tenant namespace guard reads it from the Namespace, the egress
	// proxy's policy selects its pods by it) and on every agent pod (the
	// namespace implies it; the label makes cluster-wide selection by
	// company possible). Agent pods and Jobs of a pcsync before this one
	// carry LegacyLabelCompany instead: read it with CompanyOf.
	LabelCompany = "paperclip.io/company"
	// LegacyLabelCompany is the key an older pcsync gave the company slug
	// on agent Jobs, their pods and Secrets, and sandbox pods (rendered
	// objects always had LabelCompany). Nothing sets it any more;
	// CompanyOf still reads it.
	LegacyLabelCompany = "pcsync.io/company"
	// LabelCompanyID is the company's spec.id (its Paperclip id), on the
	// Namespace and every agent pod.
	LabelCompanyID = "paperclip.io/company-id"

	// LabelRole marks what a pod is to the tenant's NetworkPolicies: the
	// egress policies select RoleAgent, the egress proxy's policy and
	// Service RoleEgressProxy. A warm pool member has none until it is
	// claimed.
	LabelRole = "paperclip.io/role"
	// RoleAgent is the LabelRole value of agent pods.
	RoleAgent = "agent"
	// RoleEgressProxy is the LabelRole value of the egress proxy's pods.
	RoleEgressProxy = "egress-proxy"

	// LabelRunID is the run id a Job or lease pod serves.
	LabelRunID = "paperclip.io/run-id"
	// LabelAgentID is the agent's id as Paperclip knows it: the run's
	// PAPERCLIP_AGENT_ID on Jobs (the request's paperclip.agentId, else the
	// agent's name), the hook's agentId on sandbox lease pods. Until
	// LabelAgent existed, Jobs carried the agent's name here (see
	// AgentOf).
	LabelAgentID = "paperclip.io/agent-id"
	// LabelAgent is the name of the pcsync agent (the Git config's
	// spec.agents[].name) a Job or lease pod serves; the executor counts
	// an agent's running Jobs by it.
	LabelAgent = "pcsync.io/agent"
	// LabelAdapter is the agent's adapter type.
	LabelAdapter = "paperclip.io/adapter"
)

// AgentOf returns the label value of the pcsync agent whose run obj (a
// Job's labels) is: LabelAgent, or, on a Job an older pcsync created
// before LabelAgent existed, LabelAgentID, which then held the agent's
// name. So a restarted daemon still counts (and thus adopts within the
// agent's concurrency) the Jobs of the pcsync before it.
func AgentOf(labels map[string]string) string {
	if v, ok := labels[LabelAgent]; ok {
		return v
	}
	return labels[LabelAgentID]
}

// CompanyOf returns the company slug of an agent pod or Job by its labels:
// LabelCompany, or, on one an older pcsync made, LegacyLabelCompany.
func CompanyOf(labels map[string]string) string {
	if v, ok := labels[LabelCompany]; ok {
		return v
	}
	return labels[LegacyLabelCompany]
}

// hashLen is the number of hex digits of the hash that keeps long label
// values distinct.
const hashLen = 8

// LabelValue makes s a valid label value: characters other than
// [A-Za-z0-9._-] become '-', the value starts and ends with an alphanumeric
// character, and one longer than 63 characters is cut to 54 and followed by
// "-" and 8 hex digits of a hash of s, so distinct long values stay distinct.
func LabelValue(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			b[i] = '-'
		}
	}
	v := strings.Trim(string(b), "-._")
	if len(v) <= 63 {
		return v
	}
	sum := sha256.Sum256([]byte(s))
	return strings.TrimRight(v[:63-hashLen-1], "-._") + "-" + hex.EncodeToString(sum[:])[:hashLen]
}
