package egressproxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/stripe/smokescreen/pkg/smokescreen"
	"github.com/stripe/smokescreen/pkg/smokescreen/conntrack"
	smetrics "github.com/stripe/smokescreen/pkg/smokescreen/metrics"

	"github.com/pcsync/pcsync/pkg/egressproxy/allow"
	"github.com/pcsync/pcsync/pkg/egressproxy/inject"
)

// denyRanges are refused beside what smokescreen refuses by itself (not
// global unicast: loopback, link-local, multicast; private; CGNAT; IPv6
// embedding IPv4): "this network", the IETF protocol assignments, the
// benchmarking range and the reserved 240/4, none of which is a public
// host.
var denyRanges = []string{"0.0.0.0/8", "192.0.0.0/24", "198.18.0.0/15", "240.0.0.0/4"}

// Proxy is one company's egress proxy.
type Proxy struct {
	list    allow.List
	opts    Options
	cfg     *smokescreen.Config
	handler http.Handler
	metrics *metrics
}

// New builds the proxy of an allow-list.
func New(l allow.List, opts Options) (*Proxy, error) {
	opts.complete()
	if len(l.Ports) == 0 {
		l.Ports = allow.DefaultPorts
	}
	d, err := newDecider(l)
	if err != nil {
		return nil, fmt.Errorf("egress proxy %s: %w", l.Company, err)
	}
	m, err := newMetrics(opts.Registerer, l.Company)
	if err != nil {
		return nil, fmt.Errorf("egress proxy %s: metrics: %w", l.Company, err)
	}
	p := &Proxy{list: l, opts: opts, metrics: m}
	p.cfg, err = p.config(d)
	if err != nil {
		return nil, fmt.Errorf("egress proxy %s: %w", l.Company, err)
	}
	gp := smokescreen.BuildProxy(p.cfg)
	gp.ConnectCopyHandler = copyTunnel(opts.IdleTimeout)
	p.handler = gp
	return p, nil
}

// config is smokescreen's configuration. It is built here rather than by
// smokescreen.NewConfig, which sets logrus' global formatter.
func (p *Proxy) config(d *decider) (*smokescreen.Config, error) {
	// smokescreen logs with logrus, URLs included at debug level; its
	// lines are dropped: the proxy's own (slog) say what is decided,
	// without a path or query.
	quiet := logrus.New()
	quiet.SetOutput(io.Discard)
	quiet.SetLevel(logrus.PanicLevel)
	c := &smokescreen.Config{
		Resolver:          &net.Resolver{},
		ConnectTimeout:    p.opts.ConnectTimeout,
		IdleTimeout:       p.opts.IdleTimeout,
		ReadHeaderTimeout: p.opts.ReadHeaderTimeout,
		DNSTimeout:        p.opts.DNSTimeout,
		ExitTimeout:       p.opts.IdleTimeout,
		Network:           "ip",
		Log:               quiet,
		MetricsClient:     smetrics.NewNoOpMetricsClient(),
		EgressACL:         d,
		RoleFromRequest:   func(r *http.Request) (string, error) { return agentOf(r), nil },
		RejectResponseHandlerWithCtx: func(s *smokescreen.SmokescreenContext, resp *http.Response) {
			p.rejected(s, resp)
		},
		PostDecisionRequestHandler: func(r *http.Request) error {
			p.allowed(r)
			return nil
		},
	}
	if p.opts.resolver != nil {
		c.Resolver = p.opts.resolver
	}
	if err := c.SetDenyRanges(denyRanges); err != nil {
		return nil, err
	}
	allowRanges := make([]string, len(p.opts.allowRanges))
	for i, r := range p.opts.allowRanges {
		allowRanges[i] = r.String()
	}
	if err := c.SetAllowRanges(allowRanges); err != nil {
		return nil, err
	}
	c.ShuttingDown.Store(false)
	c.ConnTracker = conntrack.NewTracker(c.IdleTimeout, c.MetricsClient, c.Log, c.ShuttingDown, nil)
	return c, nil
}

// ServeHTTP serves one proxy request, or a request to the credential
// route when the proxy has one.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if p.opts.Credentials != nil && inject.Serves(r) {
		p.opts.Credentials.ServeHTTP(w, r)
		return
	}
	p.handler.ServeHTTP(w, r)
}

// Serve accepts proxy clients on ln until ctx ends, then stops taking new
// ones and closes the open tunnels.
func (p *Proxy) Serve(ctx context.Context, ln net.Listener) error {
	if a, ok := ln.Addr().(*net.TCPAddr); ok {
		// smokescreen refuses a destination that is the proxy itself
		// (one of this host's addresses on the proxy's port).
		p.cfg.Port = uint16(a.Port)
		if err := p.cfg.InitializeSelfConnectionDetection(); err != nil {
			p.opts.Logger.Warn("egress proxy: no self-connection detection", "error", err)
		}
	}
	srv := &http.Server{Handler: p, ReadHeaderTimeout: p.opts.ReadHeaderTimeout}
	done := make(chan struct{})
	go func() {
		defer close(done)
		<-ctx.Done()
		p.cfg.ShuttingDown.Store(true)
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		p.cfg.ConnTracker.Range(func(k, _ any) bool {
			k.(*conntrack.InstrumentedConn).Close()
			return true
		})
	}()
	err := srv.Serve(ln)
	if errors.Is(err, http.ErrServerClosed) {
		<-done
		return nil
	}
	return fmt.Errorf("egress proxy %s: serve %s: %w", p.list.Company, ln.Addr(), err)
}

// rejected logs a request smokescreen refused or could not carry out, and
// counts a refusal. Only the host and port are logged: smokescreen's
// RequestedHost is the request's Host (a CONNECT's authority, a plain
// request's URL host), never its path or query.
func (p *Proxy) rejected(s *smokescreen.SmokescreenContext, resp *http.Response) {
	host, port := refusedHostPort(s)
	agent := UnknownAgent
	reason := ""
	if s.Decision != nil {
		agent = s.Decision.Role
		reason = s.Decision.Reason
	}
	if agent == "" {
		agent = UnknownAgent
	}
	if resp.StatusCode != http.StatusProxyAuthRequired {
		// Not a refusal: the destination could not be resolved or
		// reached.
		p.opts.Logger.Info("egress failed", "company", p.list.Company, "agent", agent,
			"host", host, "port", port, "status", resp.StatusCode)
		return
	}
	r := classify(s.Decision != nil, reason)
	p.metrics.refused.WithLabelValues(r).Inc()
	p.opts.Logger.Warn("egress refused", "company", p.list.Company, "agent", agent,
		"host", host, "port", port, "reason", r)
}

// allowed counts (and logs at debug level) a request that passed the ACL
// and whose address is public.
func (p *Proxy) allowed(r *http.Request) {
	p.metrics.allowed.WithLabelValues().Inc()
	if p.opts.Logger.Enabled(context.Background(), slog.LevelDebug) {
		host, _ := splitHostPort(r.Host)
		port := destPort(r)
		p.opts.Logger.Debug("egress allowed", "company", p.list.Company, "agent", agentOf(r), "host", host, "port", port)
	}
}

// classify maps smokescreen's decision reason to a reason label.
func classify(decided bool, reason string) string {
	switch {
	case !decided:
		return ReasonRequest
	case reason == decisionHost:
		return ReasonHost
	case reason == decisionPort:
		return ReasonPort
	case strings.Contains(reason, "no valid IP"), strings.Contains(reason, "Deny:"):
		return ReasonAddress
	default:
		return ReasonRequest
	}
}

// refusedHostPort is the host and port a refused request named. A plain
// HTTP request's Host often names no port: the port is then the one
// smokescreen decided on (its URL's scheme's), else 80.
func refusedHostPort(s *smokescreen.SmokescreenContext) (string, int) {
	host, port := splitHostPort(s.RequestedHost)
	if port == 0 && s.Decision != nil {
		_, port = splitHostPort(s.Decision.OutboundHost)
	}
	if port == 0 && s.ProxyType != "connect" {
		port = 80
	}
	return host, port
}

// splitHostPort splits a request's host[:port]; the port is 0 when absent.
func splitHostPort(hp string) (string, int) {
	h, p, err := net.SplitHostPort(hp)
	if err != nil {
		return hp, 0
	}
	n, _ := strconv.Atoi(p)
	return h, n
}
