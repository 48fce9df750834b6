package main

import (
	"context"
	"log/slog"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/pcsync/pcsync/pkg/config"
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
// Agent pods inherit from pcsync's own pod, when it runs in one, what each
// run's config allows (Settings spec.inherit; see pkg/introspect).
func newKubeExecutor(ctx context.Context, g *globalOptions, stateDir string, m *metrics.Metrics) (runs.Executor, error) {
	cfg, err := g.Kube.RESTConfig()
	if err != nil {
		return nil, err
	}
	cfg.UserAgent = "pcsync-daemon"
	opts := kubeexec.DefaultOptions()
	opts.StateDir = stateDir
	opts.Logger = g.Logger
	opts.QueueMetrics = m.Workqueue()
	opts.WindowMetrics = m
	opts.Build.Inherited = inheritFromOwnPod(ctx, g, cfg)
	return kubeexec.New(ctx, cfg, opts)
}

// inheritFromOwnPod reads pcsync's pod; a pod it cannot read is logged and
// gives nothing to inherit (runs go on without it).
func inheritFromOwnPod(ctx context.Context, g *globalOptions, cfg *rest.Config) introspect.Inheritance {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		g.Logger.Warn("cannot read the own pod; agent Jobs inherit nothing from it", slog.Any("error", err))
		return introspect.Inheritance{}
	}
	self, err := introspect.Detect(ctx, cs, introspect.DefaultOptions())
	if err != nil {
		g.Logger.Warn("cannot read the own pod; agent Jobs inherit nothing from it", slog.Any("error", err))
		return introspect.Inheritance{}
	}
	if !self.InCluster {
		return introspect.Inheritance{}
	}
	inh := self.Inherit(config.Inherit{ImagePullSecrets: true, DNSConfig: true})
	g.Logger.Info("own pod read; agent Jobs inherit what Settings spec.inherit allows",
		slog.String("pod", self.Namespace+"/"+self.Name), slog.Any("offered", inh.Describe()))
	return inh
}
