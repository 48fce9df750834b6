package main

import (
	"context"

	"github.com/pcsync/pcsync/pkg/runs"
	"github.com/pcsync/pcsync/pkg/runs/kubeexec"
)

// newKubeExecutor builds the Kubernetes executor of `pcsync daemon
// --executor kubernetes` from the global cluster-access flags. It returns
// once its watches have listed the cluster's pcsync Jobs, so that runs of an
// earlier daemon are adopted.
func newKubeExecutor(ctx context.Context, g *globalOptions, stateDir string) (runs.Executor, error) {
	cfg, err := g.Kube.RESTConfig()
	if err != nil {
		return nil, err
	}
	cfg.UserAgent = "pcsync-daemon"
	opts := kubeexec.DefaultOptions()
	opts.StateDir = stateDir
	opts.Logger = g.Logger
	return kubeexec.New(ctx, cfg, opts)
}
