// Package leader runs work in exactly one of several replicas at a time,
// with client-go's leader election on a coordination.k8s.io Lease.
//
// Run blocks until this replica holds the Lease, runs the work with a
// context that ends when leadership ends, and releases the Lease only after
// the work has returned, so that two replicas never act at once and a
// graceful shutdown hands over at once (the standby acquires a released
// Lease at its next retry instead of waiting for it to expire).
package leader

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// ServiceAccountNamespaceFile holds the namespace of a pod's service
// account.
const ServiceAccountNamespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// DefaultLeaseNamespace is the Lease namespace outside a pod without
// POD_NAMESPACE: deploy/base's, where the ApplySet's parent is by default
// too.
const DefaultLeaseNamespace = "pcsync-system"

// ErrLeadershipLost is returned by Run when the Lease could not be renewed
// (the API server unreachable for RenewDeadline, or another replica took
// it). The work was stopped; the process should exit and start again as a
// candidate, as Kubernetes controllers do.
var ErrLeadershipLost = errors.New("leader election: leadership lost")

// Options configure leader election. Start from DefaultOptions.
type Options struct {
	// Namespace and Name locate the Lease. Defaults: DefaultNamespace() and
	// "pcsync".
	Namespace, Name string
	// Identity names this replica in the Lease; unique per process. Default
	// the host name (the pod name in a pod) and a random suffix.
	Identity string
	// LeaseDuration is how long a standby waits after the last renewal it saw
	// before taking over a Lease that was not released (the leader died).
	// Default 15s.
	LeaseDuration time.Duration
	// RenewDeadline is how long the leader keeps trying to renew before it
	// gives up and stops its work. Default 10s; less than LeaseDuration.
	RenewDeadline time.Duration
	// RetryPeriod is the time between attempts to acquire or renew. Default
	// 2s.
	RetryPeriod time.Duration
	// ReleaseOnCancel releases the Lease when the context of Run ends (after
	// the work has returned), so that a standby takes over at its next retry
	// instead of after LeaseDuration. Default true.
	ReleaseOnCancel bool
	// Logger receives the election's logs. Default slog.Default().
	Logger *slog.Logger
	// OnNewLeader, when set, is called with the identity of every new leader
	// observed (including this replica). It must not block.
	OnNewLeader func(identity string)
	// OnLeading, when set, is called with true when this replica starts
	// leading (before the work starts) and with false after the work has
	// stopped. It must not block.
	OnLeading func(leading bool)
}

// DefaultOptions returns the defaults described on Options.
func DefaultOptions() Options {
	return Options{
		Namespace:       DefaultNamespace(),
		Name:            "pcsync",
		Identity:        DefaultIdentity(),
		LeaseDuration:   15 * time.Second,
		RenewDeadline:   10 * time.Second,
		RetryPeriod:     2 * time.Second,
		ReleaseOnCancel: true,
		Logger:          slog.Default(),
	}
}

// DefaultNamespace is $POD_NAMESPACE, else the namespace of the pod's
// service account, else DefaultLeaseNamespace.
func DefaultNamespace() string {
	return namespaceFrom(os.Getenv, ServiceAccountNamespaceFile)
}

func namespaceFrom(getenv func(string) string, saFile string) string {
	return cmp.Or(podNamespace(getenv, saFile), DefaultLeaseNamespace)
}

// PodNamespace is the namespace pcsync runs in: $POD_NAMESPACE, else the
// namespace of the pod's service account; "" outside a pod.
func PodNamespace() string {
	return podNamespace(os.Getenv, ServiceAccountNamespaceFile)
}

func podNamespace(getenv func(string) string, saFile string) string {
	if ns := strings.TrimSpace(getenv("POD_NAMESPACE")); ns != "" {
		return ns
	}
	if b, err := os.ReadFile(saFile); err == nil {
		return strings.TrimSpace(string(b))
	}
	return ""
}

// DefaultIdentity is the host name (in a pod, the pod name) followed by "_"
// and a random suffix, so that a restarted process never mistakes the
// Lease of its predecessor for its own.
func DefaultIdentity() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "pcsync"
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return host + "_" + hex.EncodeToString(b)
}

func (o *Options) complete() error {
	d := DefaultOptions()
	o.Namespace = cmp.Or(o.Namespace, d.Namespace)
	o.Name = cmp.Or(o.Name, d.Name)
	o.Identity = cmp.Or(o.Identity, d.Identity)
	o.LeaseDuration = cmp.Or(max(o.LeaseDuration, 0), d.LeaseDuration)
	o.RenewDeadline = cmp.Or(max(o.RenewDeadline, 0), d.RenewDeadline)
	o.RetryPeriod = cmp.Or(max(o.RetryPeriod, 0), d.RetryPeriod)
	if o.Logger == nil {
		o.Logger = d.Logger
	}
	if o.RenewDeadline >= o.LeaseDuration {
		return fmt.Errorf("leader election: renew deadline %v must be shorter than the lease duration %v", o.RenewDeadline, o.LeaseDuration)
	}
	if float64(o.RenewDeadline) <= leaderelection.JitterFactor*float64(o.RetryPeriod) {
		return fmt.Errorf("leader election: renew deadline %v must be longer than %v × the retry period %v",
			o.RenewDeadline, leaderelection.JitterFactor, o.RetryPeriod)
	}
	return nil
}

// Run waits until this replica holds the Lease, then runs work with a
// context that ends when ctx ends or leadership is lost. It returns:
//   - nil when ctx ended (before or while leading); the Lease is released
//     (ReleaseOnCancel) only after work has returned;
//   - ErrLeadershipLost (wrapped) when the Lease was lost while leading;
//   - work's own result when work returned while ctx was still alive (the
//     Lease is then released too).
func Run(ctx context.Context, client kubernetes.Interface, opts Options, work func(ctx context.Context) error) error {
	if err := opts.complete(); err != nil {
		return err
	}
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, opts.Namespace, opts.Name,
		client.CoreV1(), client.CoordinationV1(), resourcelock.ResourceLockConfig{Identity: opts.Identity})
	if err != nil {
		return fmt.Errorf("leader election: %w", err)
	}
	// The elector runs on a context of its own, which ends only once the
	// work has stopped: the Lease is never released while work runs.
	electCtx, stopElection := context.WithCancel(context.WithoutCancel(ctx))
	defer stopElection()
	e := &election{
		ctx: ctx, opts: opts, work: work, stopElection: stopElection, workDone: make(chan struct{}),
		log: opts.Logger.With(slog.String("lease", opts.Namespace+"/"+opts.Name), slog.String("identity", opts.Identity)),
	}
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   opts.LeaseDuration,
		RenewDeadline:   opts.RenewDeadline,
		RetryPeriod:     opts.RetryPeriod,
		ReleaseOnCancel: opts.ReleaseOnCancel,
		Name:            opts.Name,
		Callbacks:       e.callbacks(),
	})
	if err != nil {
		return fmt.Errorf("leader election: %w", err)
	}
	// While not (yet) leading, ctx ending stops the election; while leading,
	// the work sees ctx end and stopElection follows its return.
	stopWaiting := context.AfterFunc(ctx, e.stopIfWaiting)
	defer stopWaiting()

	e.log.Info("leader election: waiting to lead")
	le.Run(electCtx)
	return e.result()
}

// election is one Run: the work it leads with and what became of it.
type election struct {
	ctx          context.Context
	opts         Options
	log          *slog.Logger
	work         func(ctx context.Context) error
	stopElection context.CancelFunc
	workDone     chan struct{} // closed once the work has returned

	mu      sync.Mutex
	started bool  // work was started
	workErr error // what work returned
	lost    bool  // leadership ended while the work ran
	stopped bool  // the elector ended
}

func (e *election) callbacks() leaderelection.LeaderCallbacks {
	return leaderelection.LeaderCallbacks{
		OnStartedLeading: e.lead,
		OnStoppedLeading: func() {
			e.mu.Lock()
			e.stopped = true
			e.mu.Unlock()
		},
		OnNewLeader: func(identity string) {
			if identity == e.opts.Identity {
				return
			}
			e.log.Info("leader observed", slog.String("leader", identity))
			if e.opts.OnNewLeader != nil {
				e.opts.OnNewLeader(identity)
			}
		},
	}
}

// lead runs the work while leadCtx (the Lease held) and Run's ctx last,
// then lets the Lease go.
func (e *election) lead(leadCtx context.Context) {
	e.mu.Lock()
	if e.ctx.Err() != nil || e.stopped {
		e.mu.Unlock()
		e.stopElection()
		return
	}
	e.started = true
	e.mu.Unlock()
	e.log.Info("leading: started")
	if e.opts.OnLeading != nil {
		e.opts.OnLeading(true)
	}
	wctx, cancel := context.WithCancel(e.ctx)
	stopWatch := context.AfterFunc(leadCtx, cancel)
	err := e.work(wctx)
	// Only a failed renewal ends leadCtx while the work runs.
	wasLost := leadCtx.Err() != nil
	stopWatch()
	cancel()
	if e.opts.OnLeading != nil {
		e.opts.OnLeading(false)
	}
	e.mu.Lock()
	e.workErr, e.lost = err, wasLost
	e.mu.Unlock()
	close(e.workDone)
	// The work has stopped: now the Lease may go.
	e.stopElection()
}

// stopIfWaiting stops the election when Run's ctx ends before this
// replica leads.
func (e *election) stopIfWaiting() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.started {
		e.stopElection()
	}
}

// result is Run's result once the elector has returned.
func (e *election) result() error {
	e.mu.Lock()
	started := e.started
	e.mu.Unlock()
	if !started {
		return nil // ctx ended before this replica led
	}
	<-e.workDone
	e.mu.Lock()
	defer e.mu.Unlock()
	switch {
	case e.ctx.Err() != nil:
		e.log.Info("leading: stopped", slog.Bool("released", e.opts.ReleaseOnCancel))
		return nil
	case e.lost:
		e.log.Error("leading: lease lost; work stopped")
		if e.workErr != nil {
			return fmt.Errorf("%w (%s/%s): %w", ErrLeadershipLost, e.opts.Namespace, e.opts.Name, e.workErr)
		}
		return fmt.Errorf("%w (%s/%s)", ErrLeadershipLost, e.opts.Namespace, e.opts.Name)
	}
	// The work returned on its own; the Lease was released after it.
	return e.workErr
}
