package main

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/pcsync/pcsync/internal/lib/podinformer"
	"github.com/pcsync/pcsync/pkg/config"
	"github.com/pcsync/pcsync/pkg/egressproxy/agentenv"
	"github.com/pcsync/pcsync/pkg/egressproxy/scale"
	"github.com/pcsync/pcsync/pkg/egressproxy/tokensync"
	"github.com/pcsync/pcsync/pkg/images"
	"github.com/pcsync/pcsync/pkg/introspect"
	"github.com/pcsync/pcsync/pkg/metrics"
	"github.com/pcsync/pcsync/pkg/runs"
	"github.com/pcsync/pcsync/pkg/runs/kubeexec"
)

// newKubeExecutor builds the Kubernetes executor of `pcsync daemon
// --executor kubernetes` from the global cluster-access flags. It returns
// once its watches have listed the cluster's pcsync Jobs, so that runs of an
// earlier daemon are adopted.
//
// Agent pods inherit from pcsync's own pod (self, nil outside one) what
// each run's config allows (Settings spec.inherit; see pkg/introspect).
func newKubeExecutor(ctx context.Context, g *globalOptions, stateDir string, m *metrics.Metrics, self *introspect.Self, egress *egressShared) (runs.Executor, error) {
	cfg, err := g.restConfig()
	if err != nil {
		return nil, err
	}
	cfg.UserAgent = "pcsync-daemon"
	opts := kubeexec.DefaultOptions()
	opts.StateDir = stateDir
	opts.Logger = g.Logger
	opts.QueueMetrics = m.Workqueue()
	opts.WindowMetrics = m
	if self != nil {
		opts.Build.Inherited = self.Inherit(config.Inherit{ImagePullSecrets: true, DNSConfig: true})
	}
	if opts.ProxyAddresses, err = egress.start(); err != nil {
		return nil, err
	}
	opts.Pods = egress.pods
	if sc := egress.scale.Load(); sc != nil {
		opts.ProxyScale = sc
	}
	return kubeexec.New(ctx, cfg, opts)
}

// egressShared is what both roads to the cluster (the Kubernetes executor,
// the sandbox) share, started once per daemon by the first that needs it:
// the daemon's one informer of pcsync's pods (podinformer: the run
// tracker, the warm pools and the token controller read it), the watch of
// the egress proxies' Services and the credential tokens' controller. All
// live as long as the daemon (ctx), leader or not: a proxy checks a token
// whichever replica made the run; stop joins the informer.
type egressShared struct {
	ctx context.Context
	g   *globalOptions
	m   *metrics.Metrics

	once  sync.Once
	pods  *podinformer.Informer
	addrs *agentenv.Addresses
	// scale is the proxies' scaler, once started (setModel reads it from
	// the config loop).
	scale atomic.Pointer[scale.Controller]
	// idle is each tenant namespace's proxy idle period, from the last
	// config loaded (setModel).
	idle atomic.Pointer[map[string]time.Duration]
	err  error
}

// setModel takes the proxies' idle periods of a config the daemon loaded:
// a company in egress mode proxy has its spec.egress.proxyIdleSec (else
// the Settings'), and one with a warm pool none (its proxy stays up). The
// scaler looks at every proxy again.
func (e *egressShared) setModel(m *config.Model) {
	idle := make(map[string]time.Duration, len(m.Companies))
	for i := range m.Companies {
		c := &m.Companies[i]
		if m.EgressMode(c) != config.EgressProxy {
			continue
		}
		idle[m.Namespace(c)] = m.ProxyIdle(c)
		if c.Spec.Sandbox != nil && len(c.Spec.Sandbox.WarmPool) > 0 {
			idle[m.Namespace(c)] = 0
		}
	}
	e.idle.Store(&idle)
	if sc := e.scale.Load(); sc != nil {
		sc.Resync()
	}
}

// idleFor is the scaler's IdleFunc: false for a namespace that is no
// company's in egress mode proxy (its proxy is left alone).
func (e *egressShared) idleFor(ns string) (time.Duration, bool) {
	idle := e.idle.Load()
	if idle == nil {
		return 0, false
	}
	d, ok := (*idle)[ns]
	return d, ok
}

// start starts the pod informer, the watch and the controller once, and
// returns the proxies' addresses (or why they could not be had).
func (e *egressShared) start() (*agentenv.Addresses, error) {
	e.once.Do(func() {
		cfg, err := e.g.restConfig()
		if err != nil {
			e.err = err
			return
		}
		cfg.UserAgent = "pcsync-egress"
		if e.pods, e.err = startPods(e.ctx, cfg); e.err != nil {
			return
		}
		if e.addrs, e.err = proxyAddresses(e.ctx, cfg); e.err != nil {
			return
		}
		if e.err = startTokenSync(e.ctx, cfg, e.g.Logger, e.m, e.pods); e.err != nil {
			return
		}
		var sc *scale.Controller
		if sc, e.err = e.startScale(cfg); e.err == nil {
			e.scale.Store(sc)
		}
	})
	return e.addrs, e.err
}

// startScale starts the proxies' scaler on the daemon's pod informer.
func (e *egressShared) startScale(cfg *rest.Config) (*scale.Controller, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("egress proxy scale: cluster access: %w", err)
	}
	o := scale.DefaultOptions()
	o.Idle, o.Logger, o.QueueMetrics = e.idleFor, e.g.Logger, e.m.Workqueue()
	sc, err := scale.New(cs, e.pods, o)
	if err != nil {
		return nil, err
	}
	return sc, sc.Run(e.ctx)
}

// stop stops the pod informer, if it started, and waits for it.
func (e *egressShared) stop() {
	if e != nil && e.pods != nil {
		e.pods.Stop()
	}
}

// startPods starts the daemon's informer of pcsync's pods.
func startPods(ctx context.Context, cfg *rest.Config) (*podinformer.Informer, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("pod informer: cluster access: %w", err)
	}
	pods := podinformer.New(cs, podinformer.DefaultOptions())
	if err := pods.Start(ctx); err != nil {
		pods.Stop()
		return nil, err
	}
	return pods, nil
}

// proxyAddresses starts the watch of the tenants' egress proxy Services
// (egress mode proxy): runs get the proxy's ClusterIP from it.
func proxyAddresses(ctx context.Context, cfg *rest.Config) (*agentenv.Addresses, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("egress proxy Services: cluster access: %w", err)
	}
	a := agentenv.NewAddresses(cs)
	if err := a.Start(ctx, time.Minute); err != nil {
		return nil, err
	}
	return a, nil
}

// startTokenSync starts the controller that keeps the egress proxies'
// pods annotated with the live runs' credential tokens (spec.credentials),
// on the daemon's pod informer.
func startTokenSync(ctx context.Context, cfg *rest.Config, logger *slog.Logger, m *metrics.Metrics, pods *podinformer.Informer) error {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("credential tokens: cluster access: %w", err)
	}
	return tokensync.New(cs, tokensync.Options{Logger: logger, QueueMetrics: m.Workqueue(), Pods: pods}).Run(ctx)
}

// readOwnPod reads the pod pcsync runs in: what agent pods inherit, and the
// image pcsync runs from (the registry and tag of its other images, and
// the sandbox's helper container). Outside a pod, or when the pod cannot be
// read (logged: runs go on without it), nil.
func readOwnPod(ctx context.Context, g *globalOptions, cfg *rest.Config) *introspect.Self {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		g.Logger.Warn("cannot read the own pod; agent Jobs inherit nothing from it", slog.Any("error", err))
		return nil
	}
	self, err := introspect.Detect(ctx, cs, introspect.DefaultOptions())
	if err != nil {
		g.Logger.Warn("cannot read the own pod; agent Jobs inherit nothing from it", slog.Any("error", err))
		return nil
	}
	if !self.InCluster {
		return nil
	}
	inh := self.Inherit(config.Inherit{ImagePullSecrets: true, DNSConfig: true})
	g.Logger.Info("own pod read; agent Jobs inherit what Settings spec.inherit allows",
		slog.String("pod", self.Namespace+"/"+self.Name), slog.String("image", self.Image), slog.Any("offered", inh.Describe()))
	return self
}

// imageDefaults is where pcsync's images are unless the config says: in
// the registry of the image pcsync runs from (self, nil outside a pod),
// tagged as that image is, else with pcsync's version.
func imageDefaults(self *introspect.Self) config.ImageDefaults {
	d := config.ImageDefaults{Tag: version}
	if self != nil && self.Image != "" {
		registry, _, tag := images.Split(self.Image)
		d.Registry = registry
		d.Tag = cmp.Or(tag, d.Tag)
	}
	return d
}
