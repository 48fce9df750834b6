package inject

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"net/url"
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pcsync/pcsync/pkg/adapters"
)

// PathPrefix starts the path of every request to the credential route:
// /credentials/<name>/…
const PathPrefix = "/credentials/"

// Credential is one of the company's declared credentials.
type Credential struct {
	// Name is the credential's name in the company's config.
	Name  string
	Route adapters.Route
	Kind  adapters.KeyKind
	// Upstream is where requests go: https://<the provider's host> by
	// default, or the company's LLM gateway (its path is kept before the
	// request's).
	Upstream *url.URL
	// Key returns the key's current value.
	Key interface{ Key() (string, error) }
	// GitHub, when set, makes this a GitHub credential (github.go): its
	// Upstream serves git, GitHub its APIs.
	GitHub *GitHub
}

// Options configure a Handler.
type Options struct {
	// Company is the tenant's company (metrics and messages).
	Company string
	// Tokens checks each request's token against the address it came
	// from.
	Tokens Verifier
	// Transport carries the requests upstream. Default: a clone of
	// http.DefaultTransport without a proxy, keeping an idle connection
	// for each of up to 64 streams at once.
	Transport http.RoundTripper
	// Logger receives the route's logs. Default: slog.Default().
	Logger *slog.Logger
	// Registerer takes the route's metrics; nil: not registered.
	Registerer prometheus.Registerer
	// Spend, when set, counts the answers' cost and refuses a run's
	// requests once a budget is spent.
	Spend SpendGate
}

// DefaultOptions returns the options with every default but Company and
// Tokens, which have none.
func DefaultOptions() Options {
	return Options{Transport: defaultTransport(), Logger: slog.Default()}
}

// complete fills the zero fields with their defaults and checks the rest.
func (o *Options) complete() error {
	if o.Tokens == nil || o.Company == "" {
		return errors.New("credential route: Company and Tokens are required")
	}
	o.Logger = cmp.Or(o.Logger, slog.Default())
	if o.Transport == nil {
		o.Transport = defaultTransport()
	}
	return nil
}

// Handler serves the credential route.
type Handler struct {
	opts Options
	// keyHeaders are every provider's key headers: a client's are all
	// removed, so that no token (nor anything else a CLI sent as a key)
	// goes upstream.
	keyHeaders []string
	creds      map[string]*Credential
	proxy      *httputil.ReverseProxy
	metrics    *metrics
}

// NewHandler returns the route of the company's credentials.
func NewHandler(creds []Credential, opts Options) (*Handler, error) {
	if err := opts.complete(); err != nil {
		return nil, err
	}
	m, err := newMetrics(opts.Registerer, opts.Company)
	if err != nil {
		return nil, fmt.Errorf("credential route %s: %w", opts.Company, err)
	}
	h := &Handler{opts: opts, creds: map[string]*Credential{}, metrics: m}
	for _, r := range adapters.Routes() {
		for _, hd := range r.Headers {
			if !slices.Contains(h.keyHeaders, hd.Name) {
				h.keyHeaders = append(h.keyHeaders, hd.Name)
			}
		}
	}
	for i := range creds {
		c := &creds[i]
		if c.Upstream == nil || c.Upstream.Scheme != "https" || c.Key == nil {
			return nil, fmt.Errorf("credential %s/%s: want an https upstream and a key", opts.Company, c.Name)
		}
		h.creds[c.Name] = c
	}
	h.proxy = &httputil.ReverseProxy{
		Rewrite:        func(*httputil.ProxyRequest) {}, // set in ServeHTTP, per credential
		Transport:      opts.Transport,
		FlushInterval:  -1, // a streamed (SSE) response passes through as it comes
		ModifyResponse: h.refusedByProvider,
		ErrorHandler:   h.upstreamFailed,
	}
	return h, nil
}

// maxIdlePerUpstream is how many idle connections to each upstream the
// route keeps: one for each run that streamed at once, up to this many.
// Go's default (2) makes every stream beyond the second open a new TLS
// connection to the provider for its next request.
const maxIdlePerUpstream = 64

// defaultTransport is http.DefaultTransport's settings without a proxy,
// keeping maxIdlePerUpstream idle connections to each upstream.
func defaultTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.Proxy = nil
	t.MaxIdleConnsPerHost = maxIdlePerUpstream
	return t
}

// Serves reports whether r is a request to the credential route (an
// origin-form request under PathPrefix, not a proxy request).
func Serves(r *http.Request) bool {
	return r.Method != http.MethodConnect && r.URL.Host == "" && strings.HasPrefix(r.URL.Path, PathPrefix)
}

// ServeHTTP checks the request's token and forwards it with the key.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	name, rest, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, PathPrefix), "/")
	c, ok := h.creds[name]
	if !ok {
		h.metrics.count(unknownCredential, outcomeUnknown)
		http.Error(w, "pcsync: no credential "+h.opts.Company+"/"+name, http.StatusNotFound)
		return
	}
	base, path, ok := c.upstream(rest)
	if !ok {
		h.metrics.count(name, outcomeUnknown)
		http.Error(w, "pcsync: credential "+h.opts.Company+"/"+name+" serves "+GitHubGit+"/, "+GitHubAPI+"/ and "+GitHubGraphQL, http.StatusNotFound)
		return
	}
	run, why := h.authorize(c, r)
	if why != "" {
		h.metrics.count(name, why)
		h.opts.Logger.Warn("credential token refused", "company", h.opts.Company, "credential", name, "run", run, "reason", why)
		http.Error(w, "pcsync: token refused for credential "+h.opts.Company+"/"+name+": "+why, http.StatusForbidden)
		return
	}
	key, err := c.Key.Key()
	if err != nil {
		h.metrics.count(name, outcomeNoKey)
		h.opts.Logger.Error("credential key unreadable", "company", h.opts.Company, "credential", name, "error", err)
		http.Error(w, "pcsync: the key of credential "+h.opts.Company+"/"+name+" cannot be read", http.StatusBadGateway)
		return
	}
	w, done, ok := h.admit(w, r, c, run)
	if !ok {
		return
	}
	defer done()
	h.metrics.count(name, outcomeForwarded)
	// The provider answers once it has the request's body, maybe before
	// the transport's last read of it (the check for bytes past its
	// Content-Length). Without full duplex, writing the answer's head
	// closes the body, that read fails, and the transport cuts the
	// upstream connection mid-stream (golang/go#40747).
	_ = http.NewResponseController(w).EnableFullDuplex()
	out := r.Clone(r.Context())
	out.URL.Path = path
	out.URL.RawPath = ""
	h.forward(c, base, key, run).ServeHTTP(w, out)
}

// forward is the reverse proxy with c's rewrite toward base: its address,
// the key in the provider's header, every key header the client sent
// removed.
func (h *Handler) forward(c *Credential, base *url.URL, key, run string) *httputil.ReverseProxy {
	p := *h.proxy
	p.Rewrite = func(pr *httputil.ProxyRequest) {
		pr.SetURL(base)
		pr.Out.Host = base.Host
		for _, name := range h.keyHeaders {
			pr.Out.Header.Del(name)
		}
		c.setKey(pr.Out.Header, base, key)
		pr.Out.Header.Del("Proxy-Authorization")
		pr.Out = pr.Out.WithContext(withCredential(pr.Out.Context(), c, run))
	}
	return &p
}

// authorize returns the token's run, and why it is refused ("" when not).
func (h *Handler) authorize(c *Credential, r *http.Request) (run, why string) {
	token := c.clientToken(r)
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	from, perr := netip.ParseAddr(host)
	if token == "" || err != nil || perr != nil {
		return "", outcomeBadToken
	}
	return h.opts.Tokens.Verify(token, from.Unmap())
}
