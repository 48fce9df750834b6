package main

import (
	"github.com/pcsync/pcsync/internal/daemon"
	"github.com/pcsync/pcsync/pkg/apply"
	"github.com/pcsync/pcsync/pkg/companystatus/statusctl"
)

// applier gives a daemon that applies its applier, and has it record each
// company's status (CompanyStatus) in its ApplySet's namespace, owned by
// its ApplySet.
func (f *daemonFlags) applier(g *globalOptions, opts *daemon.Options) error {
	m, err := f.set.manager(g)
	if err != nil {
		return err
	}
	opts.Applier = m
	cfg, err := g.restConfig()
	if err != nil {
		return err
	}
	cfg.UserAgent = "pcsync-status"
	so := statusctl.DefaultOptions()
	so.Namespace, so.Owner = f.set.namespace, apply.ParentID(f.set.name, f.set.namespace)
	so.Logger, so.QueueMetrics = g.Logger, opts.Metrics.Workqueue()
	opts.Status, opts.StatusConfig = &so, cfg
	return nil
}
