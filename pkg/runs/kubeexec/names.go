package kubeexec

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// Label and annotation keys that pcsync puts on every run's Job, pod and
// Secret. The paperclip.io keys are those of Paperclip's Kubernetes provider.
const (
	LabelManagedBy = "app.kubernetes.io/managed-by"
	LabelRunID     = "paperclip.io/run-id"
	// LabelAgentID is the agent's id as Paperclip knows it: the run's
	// PAPERCLIP_AGENT_ID on Jobs (the request's paperclip.agentId, else the
	// agent's name), the hook's agentId on sandbox lease pods. Until
	// LabelAgent existed, Jobs carried the agent's name here (see
	// AgentOf).
	LabelAgentID = "paperclip.io/agent-id"
	// LabelAgent is the name of the pcsync agent (the Git config's
	// spec.agents[].name) a Job or lease pod serves; the executor counts
	// an agent's running Jobs by it.
	LabelAgent     = "pcsync.io/agent"
	LabelCompanyID = "paperclip.io/company-id"
	LabelAdapter   = "paperclip.io/adapter"
	LabelRole      = "paperclip.io/role"
	// LabelCompany is the company slug (the namespace already implies it;
	// the label makes cluster-wide selection by company possible).
	LabelCompany = "pcsync.io/company"

	// ManagedByValue is the value of LabelManagedBy.
	ManagedByValue = "pcsync"
	// RoleAgent is the value of LabelRole; the tenant egress NetworkPolicy
	// selects pods by it.
	RoleAgent = "agent"

	// AnnotationRequest holds the base name of the spool request file the
	// Job runs, so that a daemon adopting the Job can tell it belongs to
	// that request and not to another one with the same runId.
	AnnotationRequest = "pcsync.io/request"
	// AnnotationRunID holds the run id unabridged.
	AnnotationRunID = "pcsync.io/run-id"
	// AnnotationNonce holds the run's nonce: a random value pcsync records
	// in the run's marker (state directory) before it creates the Job. A
	// Job is adopted only when it carries the nonce of the run's marker, so
	// a Job that someone else created under the run's name is never taken
	// for the run's own (see checkOwner).
	AnnotationNonce = "pcsync.io/run-nonce"
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

// maxNameLen is the longest Job name: the Job controller copies the name
// into the pods' job-name label, whose values are at most 63 characters.
const maxNameLen = 63

// hashLen is the number of hex digits of the name hash.
const hashLen = 8

// JobName returns the name of a run's Job (and of its Secret): a readable
// prefix "<company>-<agent>-<runId>", shortened to fit, then "-" and 8 hex
// digits of a hash of the three parts. The result is a DNS-1123 label of at
// most 63 characters and depends on nothing else, so a restarted daemon finds
// the Job of a run it started before.
//
// The hash is always there, not only when the prefix is shortened: without
// it agent "x" with run "y-z" and agent "x-y" with run "z" of the same
// company would get the same name.
func JobName(company, agent, runID string) string {
	sum := sha256.Sum256([]byte(company + "\x00" + agent + "\x00" + runID))
	suffix := hex.EncodeToString(sum[:])[:hashLen]
	prefix := sanitizeDNS(company + "-" + agent + "-" + runID)
	if max := maxNameLen - hashLen - 1; len(prefix) > max {
		prefix = strings.TrimRight(prefix[:max], "-")
	}
	if prefix == "" {
		return "run-" + suffix
	}
	return prefix + "-" + suffix
}

// sanitizeDNS lower-cases s and replaces every character that may not appear
// in a DNS label by '-', trimming '-' at both ends.
func sanitizeDNS(s string) string {
	b := []byte(strings.ToLower(s))
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9') {
			b[i] = '-'
		}
	}
	return strings.Trim(string(b), "-")
}

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
