package kubeexec

import (
	"net"
	"net/url"
	"slices"
	"strconv"

	"github.com/pcsync/pcsync/pkg/adapters"
	"github.com/pcsync/pcsync/pkg/config"
	"github.com/pcsync/pcsync/pkg/egressproxy/allow"
	"github.com/pcsync/pcsync/pkg/egressproxy/inject"
)

// RunCredentials are the company's credentials a run's CLI uses, as the
// run's env gives them (egress mode proxy): the per-run token in place of
// each key, the proxy's credential route as the base URL.
type RunCredentials struct {
	// Token is the run's token; secret (the per-run Secret only).
	Token string
	// Set are the variables set: the token in each credential's key
	// variable (secret), the route in its base-URL variable.
	Set map[string]string
	// Blank are the other key variables of those providers, set empty so
	// that no key reaches the pod from the daemon's env, the agent's env
	// or a secretRefs Secret (an explicit variable wins over envFrom).
	Blank []string
}

// credentialsFor returns the credentials of agent a's CLI in company c
// whose proxy Service has address ip, with token; nil when the company
// declares none that the CLI uses.
func credentialsFor(c *config.Company, a *config.Agent, ip, token string) *RunCredentials {
	uses := adapters.Providers(adapters.Type(a.Adapter))
	routes := adapters.Routes()
	rc := &RunCredentials{Token: token, Set: map[string]string{}}
	for _, cr := range c.Spec.Credentials {
		if !slices.Contains(uses, cr.Provider) {
			continue
		}
		r := routes[cr.Provider]
		for _, kind := range []adapters.KeyKind{adapters.KeyAPIKey, adapters.KeyOAuthToken} {
			rc.Blank = append(rc.Blank, r.KeyEnv[kind]...)
		}
		rc.Set[r.KeyEnv[cr.Type][0]] = token
		u := url.URL{Scheme: "http", Host: net.JoinHostPort(ip, strconv.Itoa(allow.ProxyPort)),
			Path: inject.PathPrefix + cr.Name + r.BasePath}
		rc.Set[r.BaseURLEnv] = u.String()
	}
	if len(rc.Set) == 0 {
		return nil
	}
	rc.Blank = slices.DeleteFunc(rc.Blank, func(k string) bool { _, set := rc.Set[k]; return set })
	slices.Sort(rc.Blank)
	rc.Blank = slices.Compact(rc.Blank)
	return rc
}
