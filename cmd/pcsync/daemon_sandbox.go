package main

import (
	"cmp"
	"context"
	"path/filepath"

	"github.com/spf13/pflag"

	"github.com/pcsync/pcsync/internal/lib/leader"
	"github.com/pcsync/pcsync/pkg/apply"

	"github.com/pcsync/pcsync/pkg/config"
	"github.com/pcsync/pcsync/pkg/introspect"
	"github.com/pcsync/pcsync/pkg/metrics"
	"github.com/pcsync/pcsync/pkg/runs"
	"github.com/pcsync/pcsync/pkg/sandbox"
	"github.com/pcsync/pcsync/pkg/sandbox/hookapi"
)

// sandboxFlags are the flags of `pcsync daemon` for Paperclip's sandbox
// environments (pkg/sandbox, docs/paperclip.md).
type sandboxFlags struct {
	enabled                                   bool
	socket, serverPath, helperImage, hostRoot string
	execProtocol                              sandbox.ExecProtocol
	// paperclipDir is --paperclip-install; hello takes the hellos of the
	// packages installed there (paperclip_loaded.go).
	paperclipDir string
	hello        hookapi.HelloFunc
}

func (f *sandboxFlags) add(fl *pflag.FlagSet) {
	d := sandbox.DefaultOptions("")
	fl.BoolVar(&f.enabled, "sandbox", false,
		"serve Paperclip's sandbox environments of provider \"pcsync\": one hardened pod per lease in the company's tenant namespace "+
			"(needs cluster access; the plugin integrations/paperclip-sandbox reaches the daemon on --sandbox-socket)")
	fl.StringVar(&f.socket, "sandbox-socket", "", "Unix socket of the sandbox API, mode 0600 (default <state-dir>/sandbox.sock)")
	fl.StringVar(&f.serverPath, "sandbox-server-path", d.ServerPath, "the pcsync binary inside a lease pod, which the daemon execs to reach the pod's command server")
	fl.StringVar(&f.helperImage, "sandbox-helper-image", d.HelperImage,
		"pcsync's own image: the helper container that copies pcsync into a lease pod whose image does not hold it "+
			"(default the image this daemon runs from, else the config's: Settings spec.images.registry/pcsync:<version>)")
	f.execProtocol = d.ExecProtocol
	fl.Var(&f.execProtocol, "sandbox-exec-protocol",
		"protocol of the pod exec that carries each lease's command stream: auto (WebSocket, SPDY when the upgrade fails), "+
			"websocket, or spdy (for a proxy or load balancer in front of the API server that breaks WebSocket upgrades)")
	fl.StringVar(&f.hostRoot, "sandbox-host-root", "",
		"for nodes whose pod execs run on a shared host (kwok): keep each lease's workspace, HOME, /tmp and socket under DIR/<pod>")
	fl.StringVar(&f.paperclipDir, "paperclip-install", "",
		"the `DIR` where pcsync paperclip install put pcsync's adapter and plugin for the Paperclip server beside this daemon: "+
			"/readyz (PaperclipLoaded; degraded until then) says whether Paperclip has loaded both, at those versions (needs --sandbox)")
}

func (f *sandboxFlags) validate(d *daemonFlags) error {
	if !f.enabled {
		if f.paperclipDir != "" {
			return usageErrorf("--paperclip-install needs --sandbox: pcsync's adapter and plugin say hello on the sandbox socket")
		}
		return nil
	}
	if d.stateDirectory() == "" {
		return usageErrorf("--sandbox needs --state-dir or --spool (the lease journal and the socket live in the state directory)")
	}
	if f.hostRoot != "" && !filepath.IsAbs(f.hostRoot) {
		return usageErrorf("--sandbox-host-root %q: want an absolute path", f.hostRoot)
	}
	return nil
}

// stateDirectory is the daemon's state directory: --state-dir, else
// <spool>/.pcsync, else empty.
func (d *daemonFlags) stateDirectory() string {
	switch {
	case d.stateDir != "":
		return d.stateDir
	case d.spool != "":
		return runs.DefaultStateDir(d.spool)
	}
	return ""
}

// runner returns the daemon d's sandbox loop: the lease manager and its
// API, reporting into the daemon's metrics m. Its warm pools' owner is the
// daemon's ApplySet ID: the replicas of one deployment share it, another
// deployment on the cluster has its own. The owner's pool Lease takes the
// leader-election Lease's timings.
func (f *sandboxFlags) runner(g *globalOptions, d *daemonFlags, self *introspect.Self, m *metrics.Metrics) func(context.Context, func() *config.Model, <-chan struct{}) error {
	stateDir := d.stateDirectory()
	return func(ctx context.Context, model func() *config.Model, changed <-chan struct{}) error {
		cfg, err := g.restConfig()
		if err != nil {
			return err
		}
		cfg.UserAgent = "pcsync-sandbox"
		o := sandbox.DefaultOptions(stateDir)
		o.ServerPath, o.HelperImage, o.HostRoot, o.Logger, o.Metrics = f.serverPath, f.helperImage, f.hostRoot, g.Logger, m
		o.QueueMetrics = m.Workqueue()
		o.ExecProtocol = f.execProtocol
		o.Pool.Owner = apply.ParentID(d.set.name, d.set.namespace)
		// Two daemons of one owner: only the holder of the owner's pool
		// Lease keeps its pools. It lives beside the leader-election
		// Lease, else in the pod's namespace, else (outside a pod) in the
		// ApplySet parent's, which apply creates.
		o.Pool.Lease.Namespace = cmp.Or(d.leaseNamespace, leader.PodNamespace(), d.set.namespace)
		o.Pool.Lease.LeaseDuration, o.Pool.Lease.RenewDeadline, o.Pool.Lease.RetryPeriod = d.leaseDuration, d.renewDeadline, d.retryDur
		// A lease's pod gets the scheduling of the agent it serves, which
		// Paperclip names by its id: pcsync's marker on it says which.
		o.Agents = paperclipReconciler(g)
		if o.HelperImage == "" && self != nil {
			o.HelperImage = self.Image
		}
		o.ProxyAddresses, o.Pods, o.ProxyScale = d.shared.Addresses(), d.shared.Pods(), d.shared.Scale()
		mgr, err := sandbox.New(ctx, cfg, model, o)
		if err != nil {
			return err
		}
		defer mgr.Close()
		fwd, stopFwd := context.WithCancel(ctx)
		defer stopFwd()
		go forwardConfigChanges(fwd, changed, mgr)
		socket := f.socket
		if socket == "" {
			socket = filepath.Join(stateDir, sandbox.SocketName)
		}
		return hookapi.New(mgr, socket).WithHello(f.hello).Serve(ctx)
	}
}

// forwardConfigChanges tells mgr of each config the daemon loads (its warm
// pools follow at once), until ctx ends.
func forwardConfigChanges(ctx context.Context, changed <-chan struct{}, mgr *sandbox.Manager) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-changed:
			mgr.ConfigChanged()
		}
	}
}
