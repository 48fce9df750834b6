package inject

import (
	"encoding/json"
	"fmt"
	"net/url"

	"github.com/pcsync/pcsync/pkg/adapters"
)

// Config is the credential route's part of a tenant proxy's configuration,
// as pcsync render gives it to `pcsync egress-proxy --credentials`.
type Config struct {
	Company     string             `json:"company"`
	Credentials []CredentialConfig `json:"credentials"`
	// TokensFile is the downwardAPI file of the proxy pod's annotations.
	TokensFile string `json:"tokensFile"`
}

// CredentialConfig is one credential: its provider and key kind, where
// requests go (a GitHub credential's: the host that serves git), and the
// file of its key (the Secret's key, mounted).
type CredentialConfig struct {
	Name     string            `json:"name"`
	Provider adapters.Provider `json:"provider"`
	Type     adapters.KeyKind  `json:"type"`
	Upstream string            `json:"upstream"`
	KeyFile  string            `json:"keyFile"`
	// Header is a header credential's header.
	Header *adapters.Header `json:"header,omitempty"`
}

// ParseConfig reads a Config and checks it names known providers and key
// kinds, https upstreams and files.
func ParseConfig(raw []byte) (Config, error) {
	var c Config
	if err := json.Unmarshal(raw, &c); err != nil {
		return Config{}, fmt.Errorf("credentials: %w", err)
	}
	if c.Company == "" || c.TokensFile == "" {
		return Config{}, fmt.Errorf("credentials: company and tokensFile are required")
	}
	routes := adapters.Routes()
	for _, cr := range c.Credentials {
		// GitHub's and header credentials are no model provider's route.
		own := cr.Provider == adapters.ProviderGitHub || cr.Provider == adapters.ProviderHeader
		r, ok := routes[cr.Provider]
		_, kind := r.Headers[cr.Type]
		switch {
		case cr.Provider == adapters.ProviderHeader && (cr.Header == nil || cr.Header.Name == ""):
			return Config{}, fmt.Errorf("credential %s/%s: a header credential without a header", c.Company, cr.Name)
		case !ok && !own:
			return Config{}, fmt.Errorf("credential %s/%s: unknown provider %q", c.Company, cr.Name, cr.Provider)
		case !kind && !own:
			return Config{}, fmt.Errorf("credential %s/%s: provider %s takes no %q", c.Company, cr.Name, cr.Provider, cr.Type)
		}
		if u, err := url.Parse(cr.Upstream); err != nil || u.Scheme != "https" || u.Host == "" {
			return Config{}, fmt.Errorf("credential %s/%s: upstream %q is not an https URL", c.Company, cr.Name, cr.Upstream)
		}
		if cr.KeyFile == "" {
			return Config{}, fmt.Errorf("credential %s/%s: no keyFile", c.Company, cr.Name)
		}
	}
	return c, nil
}

// Build returns the credentials of a parsed Config.
func (c Config) Build() []Credential {
	routes := adapters.Routes()
	out := make([]Credential, len(c.Credentials))
	for i, cr := range c.Credentials {
		u, _ := url.Parse(cr.Upstream)
		out[i] = Credential{Name: cr.Name, Route: routes[cr.Provider], Kind: cr.Type, Upstream: u, Key: &FileKey{Path: cr.KeyFile}}
		switch cr.Provider {
		case adapters.ProviderGitHub:
			out[i].GitHub = NewGitHub(u.Host)
		case adapters.ProviderHeader:
			// No Provider: nothing for the spend gate to count.
			out[i].Route = adapters.Route{Headers: map[adapters.KeyKind]adapters.Header{cr.Type: *cr.Header}}
		}
	}
	return out
}
