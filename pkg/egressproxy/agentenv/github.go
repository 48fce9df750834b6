package agentenv

import (
	"cmp"
	"slices"
	"strconv"
	"strings"

	"github.com/pcsync/pcsync/pkg/config"
	"github.com/pcsync/pcsync/pkg/egressproxy/ghsocket"
	"github.com/pcsync/pcsync/pkg/egressproxy/inject"
)

// The variables of a GitHub credential besides git's config: its API's
// base URLs (as GitHub Actions names them, which many tools read) and the
// run's token where those tools take a token. GitHub's CLI takes no base
// URL: it gets the route in ghsocket.EnvRoute, its config directory (where
// pcsync's forwarder writes config.yml naming its socket, package
// ghsocket) and the run's token in its own variables.
const (
	envGitHubAPI        = "GITHUB_API_URL"
	envGitHubGraphQL    = "GITHUB_GRAPHQL_URL"
	envGitHubToken      = "GITHUB_TOKEN"
	envGHEnterprise     = "GH_ENTERPRISE_TOKEN"
	envGitHubEnterprise = "GITHUB_ENTERPRISE_TOKEN"
)

// gitHubKeyVars are the variables a GitHub token is commonly given in:
// blanked, but those that hold the run's token.
var gitHubKeyVars = []string{ghsocket.EnvToken, envGHEnterprise, envGitHubEnterprise, envGitHubToken}

// gitHubVars are the variables gitHub sets besides git's config.
var gitHubVars = []string{envGitHubAPI, envGitHubGraphQL, envGitHubToken, envGHEnterprise,
	ghsocket.EnvRoute, ghsocket.EnvConfigDir, ghsocket.EnvHost, ghsocket.EnvToken}

// gitHub adds to rc the variables of GitHub credentials creds, whose
// routes start with base (http://<proxy>:3128/credentials/): git's
// command-level config (GIT_CONFIG_COUNT, GIT_CONFIG_KEY_<n>,
// GIT_CONFIG_VALUE_<n>; it needs no file, so a read-only root file system
// takes it) rewriting https://<host>/ and GitHub's SSH forms to the route,
// reached without the proxy, with the run's token in an Authorization
// header for the route only; and
// the first credential's API base URLs, GITHUB_TOKEN, and gh's variables
// (ghsocket's forwarder sends gh's requests to that credential's route).
func gitHub(rc *Credentials, creds []config.Credential, base string) {
	if len(creds) == 0 {
		return
	}
	var kv [][2]string
	for _, cr := range creds {
		route := base + cr.Name + "/"
		git := route + inject.GitHubGit + "/"
		host := cmp.Or(cr.Host, "github.com")
		for _, from := range []string{"https://" + host + "/", "git@" + host + ":", "ssh://git@" + host + "/"} {
			kv = append(kv, [2]string{"url." + git + ".insteadOf", from})
		}
		// No proxy to the route: git asks for the proxy URL's password
		// (the agent's name is its user) before it reads NO_PROXY.
		kv = append(kv, [2]string{"http." + git + ".proxy", ""},
			[2]string{"http." + git + ".extraHeader", "Authorization: Bearer " + rc.Token})
	}
	rc.Set["GIT_CONFIG_COUNT"] = strconv.Itoa(len(kv))
	for i, p := range kv {
		n := strconv.Itoa(i)
		rc.Set["GIT_CONFIG_KEY_"+n], rc.Set["GIT_CONFIG_VALUE_"+n] = p[0], p[1]
	}
	first := base + creds[0].Name + "/"
	rc.Set[envGitHubAPI] = first + inject.GitHubAPI
	rc.Set[envGitHubGraphQL] = first + inject.GitHubGraphQL
	rc.Set[envGitHubToken] = rc.Token
	rc.Set[ghsocket.EnvRoute], rc.Set[ghsocket.EnvConfigDir], rc.Set[ghsocket.EnvToken] = first, ghsocket.DefaultDir, rc.Token
	if host := cmp.Or(creds[0].Host, "github.com"); host != "github.com" {
		// gh reads an Enterprise host's token from its own variable.
		rc.Set[ghsocket.EnvHost], rc.Set[envGHEnterprise] = host, rc.Token
	}
	rc.Blank = append(rc.Blank, gitHubKeyVars...)
}

// GitHubOnly returns a copy of rc with only its GitHub credentials'
// variables (git's config, the API's, gh's, the token's), nil when it has none:
// what a lease's execute gets when its env carries no model key, so that
// its git reaches GitHub through the route all the same.
func (rc *Credentials) GitHubOnly() *Credentials {
	if rc == nil || rc.Set["GIT_CONFIG_COUNT"] == "" {
		return nil
	}
	out := &Credentials{Token: rc.Token, Set: map[string]string{}}
	for k, v := range rc.Set {
		if strings.HasPrefix(k, "GIT_CONFIG_") || slices.Contains(gitHubVars, k) {
			out.Set[k] = v
		}
	}
	for _, k := range rc.Blank {
		if slices.Contains(gitHubKeyVars, k) {
			out.Blank = append(out.Blank, k)
		}
	}
	return out
}
