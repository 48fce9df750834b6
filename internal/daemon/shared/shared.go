package shared

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/pcsync/pcsync/internal/daemon/manager"
	"github.com/pcsync/pcsync/internal/lib/podinformer"
	"github.com/pcsync/pcsync/pkg/egressproxy/agentenv"
	"github.com/pcsync/pcsync/pkg/egressproxy/scale"
	"github.com/pcsync/pcsync/pkg/egressproxy/spendkeep"
	"github.com/pcsync/pcsync/pkg/egressproxy/tokensync"
	"github.com/pcsync/pcsync/pkg/health"
)

// Options configure the shared controllers. Start from DefaultOptions.
type Options struct {
	// Logger receives the controllers' logs. Default slog.Default().
	Logger *slog.Logger
	// QueueMetrics receives the workqueues' metrics (queues "tokensync"
	// and "proxy-scale"); nil: none.
	QueueMetrics workqueue.MetricsProvider
	// ServicesTimeout bounds the first list of the proxies' Services.
	// Default 1m.
	ServicesTimeout time.Duration
	// Health, when set, gets the spend keeper's condition
	// (spendkeep.CondSpendKept).
	Health *health.Checker
}

// DefaultOptions returns the shared controllers' defaults.
func DefaultOptions() Options {
	return Options{Logger: slog.Default(), ServicesTimeout: time.Minute}
}

func (o *Options) complete() {
	d := DefaultOptions()
	o.Logger = cmp.Or(o.Logger, d.Logger)
	o.ServicesTimeout = cmp.Or(max(o.ServicesTimeout, 0), d.ServicesTimeout)
}

// Shared holds the shared controllers, built by New and started by the
// daemon's manager (Controllers).
type Shared struct {
	opts   Options
	pods   *podinformer.Informer
	addrs  *agentenv.Addresses
	hosts  *agentenv.Hosts
	tokens *tokensync.Controller
	scale  *scale.Controller
	spend  *spendkeep.Keeper
	// idle is each tenant namespace's proxy idle period, from the last
	// config loaded (SetModel).
	idle atomic.Pointer[map[string]time.Duration]
}

// New builds the shared controllers on the cluster of cfg, none started.
func New(cfg *rest.Config, o Options) (*Shared, error) {
	o.complete()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("shared controllers: cluster access: %w", err)
	}
	s := &Shared{opts: o, pods: podinformer.New(cs, podinformer.DefaultOptions()), addrs: agentenv.NewAddresses(cs), hosts: agentenv.NewHosts(cs)}
	s.tokens = tokensync.New(cs, tokensync.Options{Logger: o.Logger, QueueMetrics: o.QueueMetrics, Pods: s.pods})
	s.spend = spendkeep.New(cs, spendkeep.Options{Logger: o.Logger, Pods: s.pods, Health: o.Health})
	so := scale.DefaultOptions()
	so.Idle, so.Logger, so.QueueMetrics = s.idleFor, o.Logger, o.QueueMetrics
	if s.scale, err = scale.New(cs, s.pods, so); err != nil {
		return nil, err
	}
	return s, nil
}

// Controllers are the shared controllers in the order they start: the
// pods first, which the token controller and the scaler read.
func (s *Shared) Controllers() []manager.Controller {
	return []manager.Controller{
		manager.Background("pods", s.pods.Start, s.pods.Stop),
		manager.Background("proxy-addresses", func(ctx context.Context) error {
			return s.addrs.Start(ctx, s.opts.ServicesTimeout)
		}, s.addrs.Wait),
		manager.Background("credential-tokens", s.tokens.Run, s.tokens.Wait),
		manager.Background("proxy-scale", s.scale.Run, s.scale.Wait),
		// On every replica: a record is written with its Deployment's
		// resourceVersion, so two replicas' passes do not lose each other's.
		manager.Background("proxy-spend", s.spend.Run, s.spend.Wait),
	}
}

// Pods is the daemon's informer of pcsync's pods, for the run tracker and
// the warm pools.
func (s *Shared) Pods() cache.SharedIndexInformer { return s.pods }

// Addresses are the egress proxies' ClusterIPs.
func (s *Shared) Addresses() *agentenv.Addresses { return s.addrs }

// Hosts finds the Paperclip server's address for the /etc/hosts of agent
// pods without cluster DNS (egress mode proxy).
func (s *Shared) Hosts() *agentenv.Hosts { return s.hosts }

// Scale is the proxies' scaler, which runs and leases ask for their
// proxy.
func (s *Shared) Scale() *scale.Controller { return s.scale }
