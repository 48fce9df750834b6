package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"

	"github.com/pcsync/pcsync/pkg/egressproxy"
	"github.com/pcsync/pcsync/pkg/egressproxy/allow"
	"github.com/pcsync/pcsync/pkg/egressproxy/inject"
	"github.com/pcsync/pcsync/pkg/egressproxy/spend"
)

type egressProxyFlags struct {
	config, allowList, listen, metrics, credentials, spend string
}

// newEgressProxyCmd is `pcsync egress-proxy`: a tenant's egress proxy
// (egress mode proxy), as the Deployment pcsync renders runs it.
func newEgressProxyCmd(g *globalOptions) *cobra.Command {
	f := &egressProxyFlags{}
	cmd := &cobra.Command{
		Use:   "egress-proxy (--allow-list JSON | --config FILE)",
		Short: "Run a tenant's egress proxy: agents reach the allow-list's hosts, nothing else",
		Long: `egress-proxy serves an HTTP proxy (CONNECT and plain requests) that lets a
company's agents reach the hosts of its allow-list (--allow-list, the JSON pcsync
render gives the Deployment paperclip-egress-proxy, or a file) on the allowed ports, and
refuses every other host, and every address that is not public (private,
loopback, link-local such as the cloud metadata address) even when an allowed
name resolves to it. A refusal is logged ("egress refused": company, agent,
host, port, reason; never a URL path or query) and counted in
pcsync_egress_proxy_refused_total. /metrics and /healthz are served on --metrics.
Agents name themselves in the proxy URL's user info: http://AGENT@HOST:3128.

With --credentials (a file pcsync render mounts when the company declares
spec.credentials), it also serves /credentials/NAME/…: a request with a live
run's token in the provider's key header is forwarded to the provider (or the
company's gateway) with the key from the credential's Secret.

With --spend (the company's budgets and prices, as pcsync render gives them), the
credential route counts what each answer costs as it streams, and refuses a run's
request, in the provider's error format, once the company's monthly budget, its
agent's or the cap per run is spent.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return f.run(cmd.Context(), g)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.allowList, "allow-list", "", `the allow-list: {"company":…,"hosts":[…],"ports":[…]}`)
	fl.StringVar(&f.config, "config", "", "the allow-list from a file (JSON or YAML)")
	fl.StringVar(&f.listen, "listen", ":3128", "the proxy's address")
	fl.StringVar(&f.metrics, "metrics", ":9090", "serve /metrics, /healthz and /spend on this address (off when empty)")
	fl.StringVar(&f.credentials, "credentials", "", "serve the credential route of this JSON (inline, as render gives it, or a file; off when empty)")
	fl.StringVar(&f.spend, "spend", "", "count and cap the credential route's spend by this JSON (inline, as render gives it; off when empty)")
	cmd.MarkFlagsOneRequired("allow-list", "config")
	cmd.MarkFlagsMutuallyExclusive("allow-list", "config")
	return cmd
}

func (f *egressProxyFlags) run(ctx context.Context, g *globalOptions) error {
	b, src := []byte(f.allowList), "--allow-list"
	if f.config != "" {
		var err error
		if b, err = os.ReadFile(f.config); err != nil {
			return fmt.Errorf("egress-proxy: %w", err)
		}
		src = f.config
	}
	list, err := allow.Parse(b)
	if err != nil {
		return fmt.Errorf("egress-proxy: %s: %w", src, err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	opts := egressproxy.Options{Logger: g.Logger, Registerer: reg}
	if f.spend != "" && f.credentials == "" {
		return errors.New("egress-proxy: --spend counts the credential route's spend, and there is none without --credentials")
	}
	var gate *spend.Gate
	if f.credentials != "" {
		if opts.Credentials, gate, err = credentialRoute(f.credentials, f.spend, g, reg); err != nil {
			return err
		}
	}
	p, err := egressproxy.New(list, opts)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", f.listen)
	if err != nil {
		return fmt.Errorf("egress-proxy: %w", err)
	}
	g.Logger.Info("egress proxy started", "company", list.Company, "listen", ln.Addr().String(), "hosts", len(list.Hosts), "ports", list.Ports)
	eg, ctx := errgroup.WithContext(ctx)
	served := make(chan struct{})
	eg.Go(func() error {
		defer close(served)
		return p.Serve(ctx, ln)
	})
	if f.metrics != "" {
		// A stopping proxy whose spend the daemon keeps serves /spend,
		// once its requests have ended, until the daemon has pulled its
		// last figures (at most 10 s).
		mctx, stop := context.WithCancel(context.WithoutCancel(ctx))
		eg.Go(func() error {
			<-served
			if gate != nil {
				gate.AwaitPull(10 * time.Second)
			}
			stop()
			return nil
		})
		eg.Go(func() error {
			defer stop()
			return serveMetrics(mctx, f.metrics, reg, gate)
		})
	}
	return eg.Wait()
}

// credentialRoute is the credential route of the configuration file, with
// the spend gate of spendJSON when it is not empty (nil else).
func credentialRoute(path, spendJSON string, g *globalOptions, reg prometheus.Registerer) (http.Handler, *spend.Gate, error) {
	raw, src := []byte(path), "--credentials"
	if !strings.HasPrefix(strings.TrimSpace(path), "{") {
		var err error
		if raw, err = os.ReadFile(path); err != nil {
			return nil, nil, fmt.Errorf("egress-proxy: %w", err)
		}
		src = path
	}
	c, err := inject.ParseConfig(raw)
	if err != nil {
		return nil, nil, fmt.Errorf("egress-proxy: %s: %w", src, err)
	}
	opts := inject.Options{Company: c.Company, Tokens: &inject.AnnotationTokens{Path: c.TokensFile}, Logger: g.Logger, Registerer: reg}
	var gate *spend.Gate
	if spendJSON != "" {
		sc, err := spend.ParseConfig([]byte(spendJSON))
		if err != nil {
			return nil, nil, fmt.Errorf("egress-proxy: --spend: %w", err)
		}
		if gate, err = spend.NewGate(sc, spend.GateOptions{Logger: g.Logger, Registerer: reg}); err != nil {
			return nil, nil, fmt.Errorf("egress-proxy: %w", err)
		}
		opts.Spend = gate
	}
	h, err := inject.NewHandler(c.Build(), opts)
	if err != nil {
		return nil, nil, fmt.Errorf("egress-proxy: %w", err)
	}
	g.Logger.Info("credential route", "company", c.Company, "credentials", len(c.Credentials))
	return h, gate, nil
}

// serveMetrics serves /metrics and /healthz until ctx ends, and /spend
// (what this process counted, spend.Report) when gate is not nil.
func serveMetrics(ctx context.Context, addr string, reg *prometheus.Registry, gate *spend.Gate) error {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	if gate != nil {
		mux.Handle("/spend", gate)
	}
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("egress-proxy: metrics %s: %w", addr, err)
	}
	return nil
}
