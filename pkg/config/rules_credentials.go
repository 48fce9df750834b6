package config

import (
	"cmp"
	"net/url"
	"slices"
	"strings"

	"github.com/pcsync/pcsync/pkg/adapters"
)

// credentials checks a company's spec.credentials: egress mode proxy (the
// proxy holds the keys), a name, a provider (a GitHub host) and a Secret
// key each declared once, a model provider that one of the company's agents
// uses, an OAuth token for anthropic only, a gateway URL with a host, and
// a host for github only.
func (k *checker) credentials(d *document, c *Company) {
	if len(c.Spec.Credentials) == 0 {
		return
	}
	at := keys("spec", "credentials")
	if mode := k.m.EgressMode(c); mode != EgressProxy {
		k.errs.add(d.posIn(at, true), at.String(),
			"company %q: credentials are held by the egress proxy, which egress mode %q does not run; use egress mode proxy", c.Metadata.Name, mode)
	}
	used := companyProviders(c)
	names, secrets, providers := map[string]Position{}, map[CredentialSecretRef]Position{}, map[adapters.Provider]Position{}
	hosts := map[string]Position{}
	for i, cr := range c.Spec.Credentials {
		cp := at.with(index(i))
		once(k, d, names, cr.Name, cp.with(key("name")), "credential %q is declared twice in company %q (first at %s)", c.Metadata.Name)
		once(k, d, secrets, cr.SecretRef, cp.with(key("secretRef")),
			"Secret %q key %q is declared twice in company %q (first at %s)", c.Metadata.Name)
		if cr.Provider == adapters.ProviderGitHub {
			k.githubCredential(d, c, cr, cp, hosts)
			continue
		}
		if cr.Provider == adapters.ProviderHeader {
			k.headerCredential(d, c, cr, cp)
			continue
		}
		if cr.Header != nil {
			p := cp.with(key("header"))
			k.errs.add(d.posIn(p, true), p.String(), "credential %s/%s: header is a header credential's; %s takes its provider's", c.Metadata.Name, cr.Name, cr.Provider)
		}
		once(k, d, providers, cr.Provider, cp.with(key("provider")),
			"provider %q has two credentials in company %q (first at %s): the proxy would not know which key to set", c.Metadata.Name)
		if cr.Host != "" {
			p := cp.with(key("host"))
			k.errs.add(d.posIn(p, false), p.String(), "credential %s/%s: host is a github credential's (GitHub Enterprise Server); %s takes gatewayUrl",
				c.Metadata.Name, cr.Name, cr.Provider)
		}
		if !slices.Contains(used, cr.Provider) {
			p := cp.with(key("provider"))
			k.errs.add(d.posIn(p, false), p.String(), "credential %s/%s: no agent of company %q uses provider %q (its agents' CLIs use %s)",
				c.Metadata.Name, cr.Name, c.Metadata.Name, cr.Provider, providerList(used))
		}
		if cr.Type == adapters.KeyOAuthToken && cr.Provider != adapters.ProviderAnthropic {
			p := cp.with(key("type"))
			k.errs.add(d.posIn(p, false), p.String(), "credential %s/%s: an OAuth token is an anthropic credential; %s takes an API key",
				c.Metadata.Name, cr.Name, cr.Provider)
		}
		if cr.GatewayURL != "" {
			if u, err := url.Parse(cr.GatewayURL); err != nil || u.Hostname() == "" {
				p := cp.with(key("gatewayUrl"))
				k.errs.add(d.posIn(p, false), p.String(), "credential %s/%s: gateway URL %q has no host", c.Metadata.Name, cr.Name, cr.GatewayURL)
			}
		}
	}
}

// githubCredential checks a github credential: one per host, a token
// (no OAuth type), no gateway URL (its hosts are GitHub's).
func (k *checker) githubCredential(d *document, c *Company, cr Credential, cp fieldPath, hosts map[string]Position) {
	at := cp.with(key("provider"))
	if cr.Host != "" {
		at = cp.with(key("host"))
	}
	once(k, d, hosts, cmp.Or(cr.Host, "github.com"), at,
		"GitHub host %q has two credentials in company %q (first at %s): the proxy would not know which token to set", c.Metadata.Name)
	if cr.Type == adapters.KeyOAuthToken {
		p := cp.with(key("type"))
		k.errs.add(d.posIn(p, false), p.String(), "credential %s/%s: a github credential holds a token (type apiKey, the default), not %q",
			c.Metadata.Name, cr.Name, cr.Type)
	}
	if cr.GatewayURL != "" {
		p := cp.with(key("gatewayUrl"))
		k.errs.add(d.posIn(p, false), p.String(), "credential %s/%s: a github credential goes to GitHub's hosts; for GitHub Enterprise Server set host",
			c.Metadata.Name, cr.Name)
	}
}

// forbiddenHeaders are the headers a header credential may not set: the
// request's framing and the proxy's own.
var forbiddenHeaders = []string{"host", "content-length", "transfer-encoding", "connection", "upgrade", "te", "trailer",
	"proxy-authorization", "proxy-connection", "keep-alive"}

// headerCredential checks a header credential: a header, a base URL
// (gatewayUrl) with a host, a header that is not the request's framing,
// two variables.
func (k *checker) headerCredential(d *document, c *Company, cr Credential, cp fieldPath) {
	add := func(f string, msg string, args ...any) {
		p := cp.with(key(f))
		k.errs.add(d.posIn(p, f == "provider"), p.String(), "credential %s/%s: "+msg, append([]any{c.Metadata.Name, cr.Name}, args...)...)
	}
	switch {
	case cr.GatewayURL == "":
		add("provider", "a header credential needs gatewayUrl, the base URL of the one API its key is for")
	case !validURLHost(cr.GatewayURL):
		add("gatewayUrl", "gateway URL %q has no host", cr.GatewayURL)
	}
	if cr.Header == nil {
		add("provider", "a header credential needs header: {name, urlEnv, tokenEnv}")
		return
	}
	if slices.Contains(forbiddenHeaders, strings.ToLower(cr.Header.Name)) {
		add("header", "the proxy cannot set header %q", cr.Header.Name)
	}
	if cr.Header.URLEnv == cr.Header.TokenEnv {
		add("header", "urlEnv and tokenEnv are both %q", cr.Header.URLEnv)
	}
	if cr.Type == adapters.KeyOAuthToken || cr.Host != "" {
		add("provider", "a header credential takes no OAuth type and no host")
	}
}

func validURLHost(s string) bool {
	u, err := url.Parse(s)
	return err == nil && u.Hostname() != ""
}

// once reports v at p when seen holds it already (msg gets v, then the
// extra arguments, then the first position); it records v's position.
func once[T comparable](k *checker, d *document, seen map[T]Position, v T, p fieldPath, msg string, args ...any) {
	pos := d.posIn(p, false)
	if first, dup := seen[v]; dup {
		var shown any = v
		if r, ok := any(v).(CredentialSecretRef); ok {
			k.errs.add(pos, p.String(), msg, append([]any{r.Name, r.Key}, append(args, first)...)...)
			return
		}
		k.errs.add(pos, p.String(), msg, append([]any{shown}, append(args, first)...)...)
		return
	}
	seen[v] = pos
}

// companyProviders are the providers the company's agents' CLIs use,
// sorted.
func companyProviders(c *Company) []adapters.Provider {
	var ps []adapters.Provider
	for _, a := range c.Spec.Agents {
		ps = append(ps, adapters.Providers(a.Adapter)...)
	}
	slices.Sort(ps)
	return slices.Compact(ps)
}

func providerList(ps []adapters.Provider) string {
	if len(ps) == 0 {
		return "none"
	}
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = string(p)
	}
	return strings.Join(s, ", ")
}
