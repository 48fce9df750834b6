package sandbox

import (
	"cmp"
	"context"
	"log/slog"
	"time"

	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/pcsync/pcsync/pkg/config"
	"github.com/pcsync/pcsync/pkg/sandbox/leasepod"
	"github.com/pcsync/pcsync/pkg/sandbox/pool"
)

//go:generate go run ../../hack/gensandbox -o ../../integrations/paperclip-sandbox/src/defaults.js

// ProviderKey is the sandbox provider key (Paperclip's driverKey) that
// pcsync's plugin registers. Paperclip reserves "kubernetes" for its own.
const ProviderKey = "pcsync"

// SocketName is the sandbox API's socket in the daemon's state directory,
// the default of `pcsync daemon --sandbox-socket`.
const SocketName = "sandbox.sock"

// PluginDefaultSocket is the socket the plugin reaches when an environment
// names none: SocketName in the state directory of a daemon whose spool
// Paperclip's server mounts at /spool (deploy/paperclip). The plugin's
// src/defaults.js is generated from it and the other defaults here
// (hack/gensandbox).
const PluginDefaultSocket = "/spool/.pcsync/" + SocketName

// Options configure a Manager. Start from DefaultOptions.
type Options struct {
	// ProxyAddresses, when set, gives every execute of a lease of a company
	// in egress mode proxy the egress proxy's variables (package
	// agentenv): the daemon sets it. Nil: no proxy variables.
	ProxyAddresses ProxyAddresses
	// StateDir holds the lease journal (<StateDir>/sandbox-leases.json).
	// Required.
	StateDir string
	// ServerPath is the pcsync binary inside a lease pod whose image does
	// not hold it (placed there by the helper container's postStart hook);
	// the daemon execs `<ServerPath> sandbox-server attach` to reach the
	// pod's command server. In pcsync's own images it is images.ServerPath
	// and no helper container runs. Default leasepod.DefaultServerPath.
	ServerPath string
	// HelperImage is the image of the helper container that copies pcsync
	// into a pod whose image does not hold it: pcsync's own image. Default
	// the config's built-in pcsync image (Model.BuiltinImage); the daemon
	// sets the image it runs from, found from its own pod.
	HelperImage string
	// HostRoot, when set, says the pods share this host's filesystem (kwok,
	// where an exec runs on the node's host): each lease's workspace, HOME,
	// /tmp and command-server socket then live under HostRoot/<pod>.
	HostRoot string
	// DefaultLeaseTTL bounds a lease whose request names no expiry and
	// whose environment sets no leaseTtlSec. Default 2h.
	DefaultLeaseTTL time.Duration
	// MaxLeaseTTL is the longest lease granted. Default 24h.
	MaxLeaseTTL time.Duration
	// ReadyTimeout bounds the wait for a new pod to run and its command
	// server to answer, when the environment sets no timeoutMs. Default
	// 4m30s (under the default RPC timeout).
	ReadyTimeout time.Duration
	// DeleteTimeout bounds the wait for a released pod to be gone. Default
	// 60s.
	DeleteTimeout time.Duration
	// ExecProtocol is the protocol of the pod exec that carries each
	// lease's command stream: ExecAuto (WebSocket, SPDY when the upgrade
	// fails), ExecWebSocket or ExecSPDY. Default ExecAuto.
	ExecProtocol ExecProtocol
	// Agents tells which agent declared in Git a lease's Paperclip agent id
	// is, so that its pod gets that agent's scheduling (package podsched);
	// the daemon asks Paperclip (paperclip.Reconciler.ResolveAgent). Nil:
	// every lease pod gets its company's defaults.
	Agents AgentResolver
	// Logger receives the manager's logs. Default slog.Default().
	Logger *slog.Logger
	// Metrics receives the manager's leases, acquires, releases and
	// executes (the daemon's *metrics.Metrics). Default none.
	Metrics Metrics
	// Pods is the daemon's informer of pcsync's pods (podinformer), which
	// the warm pools share with the daemon's other controllers. Nil: the
	// Manager runs one of its own for its pools.
	Pods cache.SharedIndexInformer
	// ProxyScale, when set, brings a company's egress proxy up for each
	// lease (package egressproxy/scale); an acquire that finds it scaled
	// to zero waits for it, from inside the lease's pod, before it
	// returns. Nil: proxies are always up.
	ProxyScale ProxyScale
	// QueueMetrics receives the warm pools' workqueue metrics (the
	// daemon's Metrics.Workqueue()). Default none.
	QueueMetrics workqueue.MetricsProvider
	// PrestartWait is how long a lease begun for a run before Paperclip
	// asked for it (Prestart) waits for the run's acquire; its pod is
	// deleted after. Default 60s.
	PrestartWait time.Duration
	// PrestartMax bounds the prestarted leases no acquire has taken yet;
	// a prestart beyond it is declined. Default 16.
	PrestartMax int
	// SuspendCheck is how often the kept leases are checked for their idle
	// time (Company spec.sandbox.suspend). Default 5s.
	SuspendCheck time.Duration
	// ClaimSweep is how often the claims of kept leases whose lease is
	// gone are looked for; ClaimGrace is how old such a claim must be to
	// be deleted. Defaults 1m and 10m.
	ClaimSweep, ClaimGrace time.Duration
	// Pool configures the warm pools of Company spec.sandbox.warmPool
	// (package pool). Zero fields take pool.DefaultOptions' values.
	Pool pool.Options
	// testHook, set only by this package's tests, is called at each step
	// of a suspend and of a resume (the step constants), where a test
	// kills the daemon.
	testHook func(step string)
}

// AgentResolver finds the agent declared in Git behind a Paperclip agent
// id.
type AgentResolver interface {
	// ResolveAgent returns the name of the agent of company c (in m) that
	// Paperclip's agent id is, or "" when it is none of c's agents; an
	// error when it cannot tell.
	ResolveAgent(ctx context.Context, m *config.Model, c *config.Company, id string) (string, error)
}

// DefaultOptions returns options for the state directory with the defaults.
func DefaultOptions(stateDir string) Options {
	return Options{
		StateDir:        stateDir,
		ServerPath:      leasepod.DefaultServerPath,
		DefaultLeaseTTL: 2 * time.Hour,
		MaxLeaseTTL:     24 * time.Hour,
		ReadyTimeout:    270 * time.Second,
		DeleteTimeout:   60 * time.Second,
		PrestartWait:    60 * time.Second,
		PrestartMax:     16,
		SuspendCheck:    5 * time.Second,
		ClaimSweep:      time.Minute,
		ClaimGrace:      10 * time.Minute,
		ExecProtocol:    ExecAuto,
		Logger:          slog.Default(),
	}
}

// complete fills the zero fields, and the negative durations, with
// DefaultOptions' values.
func (o *Options) complete() {
	d := DefaultOptions(o.StateDir)
	o.ServerPath = cmp.Or(o.ServerPath, d.ServerPath)
	o.DefaultLeaseTTL = cmp.Or(max(o.DefaultLeaseTTL, 0), d.DefaultLeaseTTL)
	o.MaxLeaseTTL = cmp.Or(max(o.MaxLeaseTTL, 0), d.MaxLeaseTTL)
	o.ReadyTimeout = cmp.Or(max(o.ReadyTimeout, 0), d.ReadyTimeout)
	o.DeleteTimeout = cmp.Or(max(o.DeleteTimeout, 0), d.DeleteTimeout)
	o.PrestartWait = cmp.Or(max(o.PrestartWait, 0), d.PrestartWait)
	o.PrestartMax = cmp.Or(max(o.PrestartMax, 0), d.PrestartMax)
	o.ExecProtocol = cmp.Or(o.ExecProtocol, d.ExecProtocol)
	o.SuspendCheck = cmp.Or(max(o.SuspendCheck, 0), d.SuspendCheck)
	o.ClaimSweep = cmp.Or(max(o.ClaimSweep, 0), d.ClaimSweep)
	o.ClaimGrace = cmp.Or(max(o.ClaimGrace, 0), d.ClaimGrace)
	if o.Logger == nil {
		o.Logger = d.Logger
	}
	if o.Metrics == nil {
		o.Metrics = noMetrics{}
	}
}
