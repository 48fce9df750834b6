package ghsocket

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/pcsync/pcsync/pkg/egressproxy/inject"
)

// Target is the credential a Forwarder sends gh's requests to.
type Target struct {
	// Route is the credential's route on the egress proxy, ending in "/":
	// http://<proxy>:3128/credentials/<name>/.
	Route *url.URL
	// Host is the credential's GitHub host: github.com, or a GitHub
	// Enterprise Server's.
	Host string
	// Token is the run's (or lease's) token, which the route takes in
	// Authorization as Bearer: secret.
	Token string
}

func (t Target) check() error {
	switch {
	case t.Route == nil || t.Route.Scheme == "" || t.Route.Host == "" || !strings.HasSuffix(t.Route.Path, "/"):
		return fmt.Errorf("ghsocket: route %v: want http://<proxy>:<port>/credentials/<name>/", t.Route)
	case t.Host == "":
		return errors.New("ghsocket: no GitHub host")
	case t.Token == "":
		return errors.New("ghsocket: no token for the route")
	}
	return nil
}

// Forwarder is the http.Handler that sends gh's requests (GitHub's Host
// and path, plain HTTP) to its Target's route.
type Forwarder struct {
	target atomic.Pointer[Target]
	proxy  *httputil.ReverseProxy
}

type routedKey struct{}

// NewForwarder returns a Forwarder to t.
func NewForwarder(t Target) (*Forwarder, error) {
	f := &Forwarder{}
	if err := f.Set(t); err != nil {
		return nil, err
	}
	f.proxy = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL = pr.In.Context().Value(routedKey{}).(*url.URL)
			pr.Out.Host = ""
			pr.Out.Header.Del("Proxy-Authorization")
			pr.Out.Header.Set("Authorization", "Bearer "+f.target.Load().Token)
		},
		// No proxy: the route is the egress proxy itself (its ClusterIP is
		// in NO_PROXY), as git's config reaches it.
		Transport: &http.Transport{
			DialContext:         (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			MaxIdleConnsPerHost: 8,
			IdleConnTimeout:     90 * time.Second,
		},
		FlushInterval: -1,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if errors.Is(err, context.Canceled) {
				return
			}
			route := f.target.Load().Route
			writeError(w, http.StatusBadGateway, fmt.Sprintf("pcsync: the credential route %s did not answer: %v", route.Redacted(), err))
		},
	}
	return f, nil
}

// Set makes t the Forwarder's target from its next request on.
func (f *Forwarder) Set(t Target) error {
	if err := t.check(); err != nil {
		return err
	}
	t.Host = strings.ToLower(t.Host)
	f.target.Store(&t)
	return nil
}

// ServeHTTP forwards r to the route, or refuses a host that is not the
// credential's (421, in GitHub's error format, which gh prints).
func (f *Forwarder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	t := f.target.Load()
	out, err := t.routeURL(r)
	if err != nil {
		writeError(w, http.StatusMisdirectedRequest, err.Error())
		return
	}
	f.proxy.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), routedKey{}, out)))
}

// routeURL is where r goes on the route: …/api/<path> for the REST API
// (api.github.com, or <host>/api/v3), …/graphql for GraphQL
// (api.github.com/graphql, <host>/api/graphql), …/git/<path> for the
// git host's other paths; an error naming the host for any other.
func (t *Target) routeURL(r *http.Request) (*url.URL, error) {
	// The credential's host may name a port; gh's Host names it only
	// when it is not 443.
	host := strings.ToLower(r.Host)
	if h, port, err := net.SplitHostPort(host); err == nil && (host != t.Host || port == "443") {
		host = h
	}
	path, raw := r.URL.Path, r.URL.EscapedPath()
	var seg string
	switch {
	case t.Host == "github.com" && host == "api.github.com" && path == "/graphql":
		seg, path, raw = inject.GitHubGraphQL, "", ""
	case t.Host == "github.com" && host == "api.github.com":
		seg = inject.GitHubAPI
	case host != t.Host:
		return nil, fmt.Errorf("pcsync: this GitHub CLI reaches only %s through the egress proxy's credential route, not %s", t.Host, host)
	case t.Host != "github.com" && path == "/api/graphql":
		seg, path, raw = inject.GitHubGraphQL, "", ""
	case t.Host != "github.com" && (path == "/api/v3" || strings.HasPrefix(path, "/api/v3/")):
		seg, path, raw = inject.GitHubAPI, strings.TrimPrefix(path, "/api/v3"), strings.TrimPrefix(raw, "/api/v3")
	case t.Host != "github.com" && (path == "/api" || strings.HasPrefix(path, "/api/")):
		return nil, fmt.Errorf("pcsync: the credential route of %s serves its REST API (/api/v3) and GraphQL (/api/graphql), not %s", t.Host, path)
	default:
		seg = inject.GitHubGit
	}
	u := *t.Route
	u.Path = t.Route.Path + seg + path
	u.RawPath = ""
	if raw != path {
		u.RawPath = t.Route.EscapedPath() + seg + raw
	}
	u.RawQuery = r.URL.RawQuery
	return &u, nil
}

// writeError answers with GitHub's error body: gh prints its message.
func writeError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]string{"message": msg})
}
