package main

import (
	"cmp"
	"context"
	"log/slog"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/pcsync/pcsync/internal/daemon/shared"
	"github.com/pcsync/pcsync/pkg/config"
	"github.com/pcsync/pcsync/pkg/health"
	"github.com/pcsync/pcsync/pkg/images"
	"github.com/pcsync/pcsync/pkg/introspect"
	"github.com/pcsync/pcsync/pkg/metrics"
	"github.com/pcsync/pcsync/pkg/runs"
	"github.com/pcsync/pcsync/pkg/runs/kubeexec"
)

// newKubeExecutor builds the Kubernetes executor of `pcsync daemon
// --executor kubernetes` from the global cluster-access flags, on the
// daemon's shared controllers sh (the pod informer, the proxies' addresses
// and scaler). It returns once its watches have listed the cluster's
// pcsync Jobs, so that runs of an earlier daemon are adopted.
//
// Agent pods inherit from pcsync's own pod (self, nil outside one) what
// each run's config allows (Settings spec.inherit; see pkg/introspect).
func newKubeExecutor(ctx context.Context, g *globalOptions, stateDir string, m *metrics.Metrics, self *introspect.Self, sh *shared.Shared) (runs.Executor, error) {
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
	opts.ProxyAddresses, opts.Pods, opts.ProxyScale = sh.Addresses(), sh.Pods(), sh.Scale()
	opts.Hosts = sh.Hosts()
	return kubeexec.New(ctx, cfg, opts)
}

// newShared builds the controllers both roads to the cluster share (the
// pod informer, the proxies' Services watch, the token controller, the
// proxies' scaler), which the daemon starts on every replica.
func newShared(g *globalOptions, m *metrics.Metrics, h *health.Checker) (*shared.Shared, error) {
	cfg, err := g.restConfig()
	if err != nil {
		return nil, err
	}
	cfg.UserAgent = "pcsync-egress"
	o := shared.DefaultOptions()
	o.Logger, o.QueueMetrics, o.Health = g.Logger, m.Workqueue(), h
	return shared.New(cfg, o)
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
