package testgithub

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
)

// API is api.github.com of a test: GET /repos/<owner>/<repo> answers
// {"full_name": "<owner>/<repo>"}, POST /graphql a viewer's login
// (octocat), each only with Token in Bearer (else 401 Bad credentials);
// anything else 404.
type API struct {
	// Token is the real token.
	Token string
	mu    sync.Mutex
	seen  []string
}

func (a *API) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	a.seen = append(a.seen, r.Method+" "+r.Host+" "+r.URL.Path+" "+r.Header.Get("Authorization"))
	a.mu.Unlock()
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	switch {
	case a.Token == "" || r.Header.Get("Authorization") != "Bearer "+a.Token:
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = io.WriteString(w, `{"message":"Bad credentials"}`)
	case r.Method == http.MethodPost && r.URL.Path == "/graphql":
		_, _ = io.WriteString(w, `{"data":{"viewer":{"login":"octocat"}}}`)
	case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/repos/"):
		_, _ = fmt.Fprintf(w, `{"full_name":%q}`, strings.TrimPrefix(r.URL.Path, "/repos/"))
	default:
		w.WriteHeader(http.StatusNotFound)
		_, _ = io.WriteString(w, `{"message":"Not Found"}`)
	}
}

// Requests returns each request's method, Host, path and Authorization,
// space-separated, in order.
func (a *API) Requests() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.seen...)
}
