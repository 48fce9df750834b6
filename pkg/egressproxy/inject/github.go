package inject

import (
	"encoding/base64"
	"net/http"
	"net/url"
	"strings"
)

// The path segments of a GitHub credential's route, after
// /credentials/<name>/: git's smart HTTP (…/git/<owner>/<repo>.git/…,
// what git's insteadOf makes of https://<host>/), the REST API (…/api/…)
// and the GraphQL API (…/graphql).
const (
	GitHubGit     = "git"
	GitHubAPI     = "api"
	GitHubGraphQL = "graphql"
)

// GitHub is the API side of a GitHub credential, whose Upstream is the
// host git is served from (https://github.com, or a GitHub Enterprise
// Server's https://<host>).
type GitHub struct {
	// API is the REST API's base: https://api.github.com, or
	// https://<host>/api/v3.
	API *url.URL
	// GraphQL is the GraphQL endpoint: https://api.github.com/graphql, or
	// https://<host>/api/graphql.
	GraphQL *url.URL
}

// NewGitHub is the API side of a GitHub credential whose git is served
// from gitHost: github.com's API hosts, or the Enterprise Server's paths.
func NewGitHub(gitHost string) *GitHub {
	if gitHost == "github.com" {
		return &GitHub{API: &url.URL{Scheme: "https", Host: "api.github.com"},
			GraphQL: &url.URL{Scheme: "https", Host: "api.github.com", Path: "/graphql"}}
	}
	return &GitHub{API: &url.URL{Scheme: "https", Host: gitHost, Path: "/api/v3"},
		GraphQL: &url.URL{Scheme: "https", Host: gitHost, Path: "/api/graphql"}}
}

// upstream is where a request for rest (its path after the credential's
// name) goes: the upstream's base and the path after it; false when a
// GitHub credential's path names none of its segments.
func (c *Credential) upstream(rest string) (base *url.URL, path string, ok bool) {
	if c.GitHub == nil {
		return c.Upstream, "/" + rest, true
	}
	seg, tail, _ := strings.Cut(rest, "/")
	switch seg {
	case GitHubGit:
		return c.Upstream, "/" + tail, true
	case GitHubAPI:
		return c.GitHub.API, "/" + tail, true
	case GitHubGraphQL:
		if tail != "" {
			return nil, "", false
		}
		g := *c.GitHub.GraphQL
		g.Path = ""
		return &g, c.GitHub.GraphQL.Path, true
	}
	return nil, "", false
}

// clientToken is the token a request to c carries: in the provider's key
// header, or for GitHub in Authorization as git sends it (Basic, the token
// the password) or as GitHub's API takes it (Bearer, or "token").
func (c *Credential) clientToken(r *http.Request) string {
	if c.GitHub == nil {
		hd := c.Route.Headers[c.Kind]
		token := strings.TrimSpace(r.Header.Get(hd.Name))
		if hd.Scheme != "" {
			token = strings.TrimSpace(strings.TrimPrefix(token, hd.Scheme+" "))
		}
		return token
	}
	scheme, value, _ := strings.Cut(strings.TrimSpace(r.Header.Get("Authorization")), " ")
	switch strings.ToLower(scheme) {
	case "basic":
		raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(value))
		if err != nil {
			return ""
		}
		_, password, _ := strings.Cut(string(raw), ":")
		return password
	case "bearer", "token":
		return strings.TrimSpace(value)
	}
	return ""
}

// setKey puts key in h as base expects it: the provider's header, or for
// GitHub Basic toward git's host (as git sends a token, the user name
// x-access-token) and Bearer toward the APIs.
func (c *Credential) setKey(h http.Header, base *url.URL, key string) {
	switch {
	case c.GitHub == nil:
		hd := c.Route.Headers[c.Kind]
		h.Set(hd.Name, hd.Value(key))
	case base == c.Upstream:
		h.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte("x-access-token:"+key)))
	default:
		h.Set("Authorization", "Bearer "+key)
	}
}
