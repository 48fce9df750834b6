package agentpod

import (
	"crypto/sha256"
	"encoding/hex"
)

// AnnotationTokenHash is the annotation of an agent pod (a run's Job pod, a
// lease pod) that holds TokenHash of its credential token: the egress proxy
// learns from it which pod may use which token, and the token itself stays
// in the pod's Secret.
const AnnotationTokenHash = "pcsync.io/credential-token-sha256"

// TokenHash is the value of AnnotationTokenHash for token: its SHA-256, in
// hex.
func TokenHash(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}
