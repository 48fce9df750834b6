package inject

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"net/netip"
)

// tokenPrefix starts every token, so that a token is told from a key at a
// glance (and by secret scanners).
const tokenPrefix = "pcsync-run-"

// NewToken returns a new random token (256 bits).
func NewToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("credential token: %w", err)
	}
	return tokenPrefix + base64.RawURLEncoding.EncodeToString(b), nil
}

// Verifier tells whether a token may be used from an address: it returns
// the run the token belongs to, and why it is refused ("" when it is not:
// one of the outcome reasons).
type Verifier interface {
	Verify(token string, from netip.Addr) (run, why string)
}
