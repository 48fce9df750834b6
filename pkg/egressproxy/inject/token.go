package inject

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strings"
)

// tokenPrefix starts every token, so that a token is told from a key at a
// glance (and by secret scanners).
const tokenPrefix = "pcsync-run."

// MinKeyLen is the shortest signing key Tokens accepts.
const MinKeyLen = 32

// Tokens mints and checks the per-run tokens of one tenant: a token names
// its company and its run (a run id or a lease id) and is signed with the
// tenant's key (HMAC-SHA256), so that it cannot be forged or moved to
// another tenant.
type Tokens struct{ key []byte }

// NewTokens returns the Tokens of a signing key of at least MinKeyLen bytes.
func NewTokens(key []byte) (*Tokens, error) {
	if len(key) < MinKeyLen {
		return nil, errors.New("token signing key: shorter than 32 bytes")
	}
	return &Tokens{key: append([]byte(nil), key...)}, nil
}

// Mint returns the token of company's run.
func (t *Tokens) Mint(company, run string) string {
	body := base64.RawURLEncoding.EncodeToString([]byte(company + "\n" + run))
	return tokenPrefix + body + "." + base64.RawURLEncoding.EncodeToString(t.sign(body))
}

// Check returns the company and run a token names, or false when it is not
// one that this key signed.
func (t *Tokens) Check(token string) (company, run string, ok bool) {
	rest, found := strings.CutPrefix(token, tokenPrefix)
	if !found {
		return "", "", false
	}
	body, sig, found := strings.Cut(rest, ".")
	if !found {
		return "", "", false
	}
	got, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil || !hmac.Equal(got, t.sign(body)) {
		return "", "", false
	}
	raw, err := base64.RawURLEncoding.DecodeString(body)
	if err != nil {
		return "", "", false
	}
	company, run, found = strings.Cut(string(raw), "\n")
	return company, run, found && company != "" && run != ""
}

func (t *Tokens) sign(body string) []byte {
	m := hmac.New(sha256.New, t.key)
	m.Write([]byte(body))
	return m.Sum(nil)
}
