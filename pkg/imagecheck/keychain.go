package imagecheck

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
)

// dockerHub is how registries name Docker Hub in a docker config.
var dockerHub = map[string]bool{
	"index.docker.io": true, "docker.io": true, "registry-1.docker.io": true,
}

// Keychain holds registry credentials by host, from the .dockerconfigjson
// of image pull secrets. The first secret that names a host wins, as the
// kubelet tries a pod's pull secrets in order. The zero Keychain is
// anonymous everywhere.
type Keychain struct {
	auths map[string]authn.AuthConfig
}

// dockerConfig is the part of a .dockerconfigjson (or a .dockercfg, which
// is the auths map alone) that holds credentials.
type dockerConfig struct {
	Auths map[string]dockerAuth `json:"auths"`
}

type dockerAuth struct {
	Username      string `json:"username,omitempty"`
	Password      string `json:"password,omitempty"`
	Auth          string `json:"auth,omitempty"`
	IdentityToken string `json:"identitytoken,omitempty"`
	RegistryToken string `json:"registrytoken,omitempty"`
}

// Add takes the credentials of one pull secret's data (its
// .dockerconfigjson, or the older .dockercfg). source names the secret in
// an error, which never quotes the data.
func (k *Keychain) Add(source string, data []byte) error {
	var cfg dockerConfig
	if err := json.Unmarshal(data, &cfg); err != nil || cfg.Auths == nil {
		// .dockercfg: the auths map itself.
		var auths map[string]dockerAuth
		if err2 := json.Unmarshal(data, &auths); err2 != nil {
			return fmt.Errorf("%s: not a docker config (.dockerconfigjson or .dockercfg)", source)
		}
		cfg.Auths = auths
	}
	if k.auths == nil {
		k.auths = map[string]authn.AuthConfig{}
	}
	for server, a := range cfg.Auths {
		host := registryHost(server)
		if _, ok := k.auths[host]; ok {
			continue
		}
		c := authn.AuthConfig{Username: a.Username, Password: a.Password, IdentityToken: a.IdentityToken, RegistryToken: a.RegistryToken}
		if a.Auth != "" && c.Username == "" {
			raw, err := base64.StdEncoding.DecodeString(a.Auth)
			user, pass, ok := strings.Cut(string(raw), ":")
			if err != nil || !ok {
				return fmt.Errorf("%s: auths[%q].auth is not base64 of user:password", source, server)
			}
			c.Username, c.Password = user, pass
		}
		k.auths[host] = c
	}
	return nil
}

// Resolve implements authn.Keychain.
func (k *Keychain) Resolve(r authn.Resource) (authn.Authenticator, error) {
	host := registryHost(r.RegistryStr())
	if c, ok := k.auths[host]; ok {
		return authn.FromConfig(c), nil
	}
	return authn.Anonymous, nil
}

// registryHost turns a docker config's server key ("https://reg:5000/v1/",
// "reg:5000") into the registry's host[:port], Docker Hub's names into one.
func registryHost(server string) string {
	s := strings.TrimPrefix(strings.TrimPrefix(server, "https://"), "http://")
	s, _, _ = strings.Cut(s, "/")
	s = strings.ToLower(s)
	if dockerHub[s] {
		return "index.docker.io"
	}
	return s
}
