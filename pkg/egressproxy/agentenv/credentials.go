package agentenv

import (
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/pcsync/pcsync/pkg/adapters"
	"github.com/pcsync/pcsync/pkg/config"
	"github.com/pcsync/pcsync/pkg/egressproxy/allow"
	"github.com/pcsync/pcsync/pkg/egressproxy/inject"
)

// Credentials are the company's credentials an agent's CLI uses, as its
// env gives them (egress mode proxy): the per-run token in place of each
// key, the proxy's credential route as the base URL; for GitHub, git's
// config (github.go).
type Credentials struct {
	// Token is the run's (or lease's) token: secret.
	Token string
	// Set are the variables set: the token in each credential's key
	// variable, the route in its base-URL variable.
	Set map[string]string
	// Blank are the other key variables of those providers: set empty on
	// a Job's pod (an explicit variable wins over a secretRefs envFrom),
	// dropped from a lease's execute env.
	Blank []string
}

// CredentialsFor returns the credentials of an agent of adapter type t in
// company c whose proxy Service has address ip, with token; nil when the
// company declares none that the CLI uses.
func CredentialsFor(c *config.Company, t adapters.Type, ip, token string) *Credentials {
	routes := adapters.Routes()
	rc := &Credentials{Token: token, Set: map[string]string{}}
	proxy := url.URL{Scheme: "http", Host: net.JoinHostPort(ip, strconv.Itoa(allow.ProxyPort))}
	var github []config.Credential
	for _, cr := range c.CredentialsUsedBy(t) {
		switch cr.Provider {
		case adapters.ProviderGitHub:
			github = append(github, cr)
			continue
		case adapters.ProviderHeader:
			u := proxy
			u.Path = inject.PathPrefix + cr.Name
			rc.Set[cr.Header.URLEnv], rc.Set[cr.Header.TokenEnv] = u.String(), token
			continue
		}
		r := routes[cr.Provider]
		for _, kind := range []adapters.KeyKind{adapters.KeyAPIKey, adapters.KeyOAuthToken} {
			rc.Blank = append(rc.Blank, r.KeyEnv[kind]...)
		}
		// Every variable of the kind: each CLI reads its own (codex exec
		// reads CODEX_API_KEY, not OPENAI_API_KEY).
		for _, k := range r.KeyEnv[cr.Type] {
			rc.Set[k] = token
		}
		u := proxy
		u.Path = inject.PathPrefix + cr.Name + r.BasePath
		rc.Set[r.BaseURLEnv] = u.String()
	}
	gitHub(rc, github, proxy.String()+inject.PathPrefix)
	if len(rc.Set) == 0 {
		return nil
	}
	rc.Blank = slices.DeleteFunc(rc.Blank, func(k string) bool { _, set := rc.Set[k]; return set })
	slices.Sort(rc.Blank)
	if rc.Blank = slices.Compact(rc.Blank); len(rc.Blank) == 0 {
		rc.Blank = nil
	}
	return rc
}

// WithToken returns a copy of rc that gives token wherever rc gives its
// token (a lease's Credentials, made before its token, to find the key
// variables an execute carries; see KeyVars).
func (rc *Credentials) WithToken(token string) *Credentials {
	out := &Credentials{Token: token, Set: make(map[string]string, len(rc.Set)), Blank: slices.Clone(rc.Blank)}
	for k, v := range rc.Set {
		out.Set[k] = strings.ReplaceAll(v, rc.Token, token)
	}
	return out
}

// Secret reports whether v, a value of Set, holds the token (in the
// per-run Secret then, not in the pod's spec).
func (rc *Credentials) Secret(v string) bool { return strings.Contains(v, rc.Token) }

// KeyVars reports whether env carries a value in one of the key variables
// that creds replaces.
func (rc *Credentials) KeyVars(env map[string]string) []string {
	var out []string
	for k := range rc.Set {
		if k != "" && env[k] != "" && rc.Set[k] == rc.Token {
			out = append(out, k)
		}
	}
	for _, k := range rc.Blank {
		if env[k] != "" {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}
