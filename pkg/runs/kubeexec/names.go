package kubeexec

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// Annotation keys that pcsync puts on every run's Job. Its labels are
// those of every agent pod, in package agentpod.
const (
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
