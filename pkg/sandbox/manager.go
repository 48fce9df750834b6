package sandbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/pcsync/pcsync/internal/lib/agentpod"
	"github.com/pcsync/pcsync/internal/lib/podinformer"
	"github.com/pcsync/pcsync/pkg/config"
	"github.com/pcsync/pcsync/pkg/sandbox/leasepod"
	"github.com/pcsync/pcsync/pkg/sandbox/pool"
	"github.com/pcsync/pcsync/pkg/secretcheck"
	"github.com/pcsync/pcsync/pkg/tenantns"
)

// Manager holds the sandbox leases of one daemon: it creates a pod per
// lease, runs executes on the pod's command server over one stream, deletes
// the pod on release or at the lease's expiry, and journals every lease so
// that the next daemon adopts or reaps its pods.
type Manager struct {
	opts  Options
	cs    kubernetes.Interface
	rest  *rest.Config
	model func() *config.Model
	j     *journal
	log   *slog.Logger
	// tenants confirms that a lease's namespace is its company's.
	tenants *tenantns.Guard
	// credentials confirms that the Secrets of a lease's credentials exist.
	credentials *secretcheck.Guard

	// pools keeps the warm pools; nil when the daemon keeps none.
	pools *pool.Controller
	// ownPods is the pod informer the Manager runs for its pools when
	// Options.Pods is nil; Close stops it.
	ownPods *podinformer.Informer
	// warm are the streams opened to warm pool members ahead of their
	// claims (warm_stream.go).
	warm warmStreams
	// early are the leases begun for runs before Paperclip asked for them
	// (Prestart).
	early prestarts
	// closing is set when Close begins (read without the lock: a claim
	// takes no lock of the Manager's).
	closing atomic.Bool

	mu     sync.Mutex
	leases map[string]*lease
	closed bool
	wg     sync.WaitGroup
	// stopping ends when Close begins: the background opens of lease
	// streams stop with it, so Close does not wait out their deadlines.
	stopping context.Context
	stop     context.CancelFunc
}

// ErrNoLease is returned (wrapped) for a lease id the daemon does not hold.
var ErrNoLease = errors.New("no such lease")

// New returns a manager that talks to the cluster of cfg and reads the
// current config from model. It adopts the leases of its journal whose pods
// still exist and are not expired, and deletes the pods of expired ones.
func New(ctx context.Context, cfg *rest.Config, model func() *config.Model, o Options) (*Manager, error) {
	o.complete()
	if o.StateDir == "" {
		return nil, errors.New("sandbox: no state directory")
	}
	if err := o.Pool.Check(); err != nil && !o.Pool.Disabled {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("sandbox: cluster access: %w", err)
	}
	j, err := openJournal(o.StateDir)
	if err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	m := &Manager{opts: o, cs: cs, rest: cfg, model: model, j: j, log: o.Logger, leases: map[string]*lease{},
		tenants: tenantns.New(cs, 0), credentials: secretcheck.NewGuard(cs, secretcheck.DefaultOptions())}
	m.stopping, m.stop = context.WithCancel(context.Background())
	if err := m.journalClaims(ctx); err != nil {
		// The journal holds the leases; the claims only stand in for a
		// journal lost, and the orphan sweep retries their list.
		m.log.Warn("sandbox: the kept leases' claims not read at start", slog.Any("error", err))
	}
	if err := m.adopt(ctx); err != nil {
		return nil, err
	}
	m.startPools(ctx)
	m.wg.Add(1)
	go m.suspendLoop()
	return m, nil
}

// adopt takes over the journal's leases: a live pod is adopted (its
// executes reconnect to its command server on first use), a lease past its
// expiry is deleted, and a lease whose pod is gone is forgotten (a kept
// lease whose claim is there is suspended: adoptKept). Pods of
// pcsync's leases that are past their expiry but not in this journal (an
// earlier state directory) are deleted too.
func (m *Manager) adopt(ctx context.Context) error {
	now := time.Now()
	for _, r := range m.j.leases() {
		pod, err := m.cs.CoreV1().Pods(r.Namespace).Get(ctx, r.ID, metav1.GetOptions{})
		if r.Keep != nil {
			if kept, err := m.adoptKept(ctx, &r, pod, err, now); kept || err != nil {
				if err != nil {
					return err
				}
				continue
			}
		}
		switch {
		case apierrors.IsNotFound(err):
			m.log.Info("sandbox lease forgotten: its pod is gone", slog.String("lease", r.ID), slog.String("namespace", r.Namespace))
			if err := m.j.drop(r.ID); err != nil {
				return err
			}
			m.opts.Metrics.SandboxRelease(string(EndAdopted))
			continue
		case err != nil:
			return fmt.Errorf("Pod/%s/%s: adopt: %w", r.Namespace, r.ID, err)
		}
		if _, member := pod.Labels[pool.Label]; member {
			// A claim that never patched its member: the pod is still the
			// pool's (the pool adopts it), the lease never was.
			m.log.Info("sandbox lease forgotten: its claim of a warm pool member did not happen", slog.String("lease", r.ID))
			if err := m.j.drop(r.ID); err != nil {
				return err
			}
			continue
		}
		if r.PodUID != "" && string(pod.UID) != r.PodUID {
			m.log.Warn("sandbox lease forgotten: its pod was replaced by another of the same name", slog.String("lease", r.ID))
			if err := m.j.drop(r.ID); err != nil {
				return err
			}
			m.opts.Metrics.SandboxRelease(string(EndAdopted))
			continue
		}
		r.PodUID = string(pod.UID)
		l := m.track(r)
		if !now.Before(r.ExpiresAt) || pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded {
			m.log.Info("sandbox lease reaped at start: expired or its pod ended", slog.String("lease", r.ID),
				slog.Time("expiresAt", r.ExpiresAt), slog.String("phase", string(pod.Status.Phase)))
			m.releaseAsync(l, EndExpired)
			continue
		}
		if r.Prestarted {
			m.log.Info("sandbox lease reaped at start: begun for its run, no acquire took it", slog.String("lease", r.ID))
			m.opts.Metrics.SandboxPrestart(r.Company, string(PrestartUnclaimed))
			m.releaseAsync(l, EndUnclaimed)
			continue
		}
		l.to(LeasePending, LeaseReady)
		m.log.Info("sandbox lease adopted", slog.String("lease", r.ID), slog.String("namespace", r.Namespace),
			slog.Time("expiresAt", r.ExpiresAt))
	}
	m.reapUnjournaled(ctx, now)
	return nil
}

// reapUnjournaled deletes the expired pods of pcsync's leases that no
// journal holds (an earlier state directory).
func (m *Manager) reapUnjournaled(ctx context.Context, now time.Time) {
	pods, err := m.cs.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{
		LabelSelector: agentpod.LabelManagedBy + "=" + agentpod.ManagedByValue + "," + leasepod.LabelLease,
	})
	if err != nil {
		m.log.Warn("sandbox: cannot list lease pods to reap expired ones", slog.Any("error", err))
		return
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if m.lookup(p.Name) != nil || p.DeletionTimestamp != nil {
			continue
		}
		exp, err := time.Parse(time.RFC3339, p.Annotations[leasepod.AnnotationExpiresAt])
		if err == nil && now.Before(exp) {
			continue
		}
		m.log.Info("sandbox: deleting an expired lease pod of no journal", slog.String("pod", p.Namespace+"/"+p.Name))
		if err := m.deletePod(ctx, p.Namespace, p.Name, string(p.UID)); err != nil {
			m.log.Warn("sandbox: delete expired lease pod", slog.String("pod", p.Namespace+"/"+p.Name), slog.Any("error", err))
		}
	}
}

// track registers a lease and arms its expiry.
func (m *Manager) track(r leasepod.Record) *lease {
	l := newLease(r)
	// Whether an acquire took a prestarted lease changes: it is kept
	// under l.mu (journalLease).
	l.unclaimed, l.Record.Prestarted = r.Prestarted, false
	m.mu.Lock()
	m.leases[r.ID] = l
	m.mu.Unlock()
	m.hold(l)
	if d := time.Until(r.ExpiresAt); d > 0 {
		l.expiry = time.AfterFunc(d, func() {
			m.log.Info("sandbox lease expired: deleting its pod", slog.String("lease", l.ID))
			m.releaseAsync(l, EndExpired)
		})
	}
	return l
}

func (m *Manager) lookup(id string) *lease {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.leases[id]
}

func (m *Manager) forget(id string) {
	m.mu.Lock()
	delete(m.leases, id)
	m.mu.Unlock()
}

// Close stops the manager: it waits for releases in progress and closes
// every command stream. Lease pods stay (the next daemon adopts them) and
// end at their expiry at the latest.
func (m *Manager) Close() {
	m.closing.Store(true)
	m.early.stop()
	if m.pools != nil {
		// Members stay: the next daemon adopts them.
		m.pools.Close()
	}
	if m.ownPods != nil {
		m.ownPods.Stop()
	}
	m.closeStreams()
	m.mu.Lock()
	m.closed = true
	ls := make([]*lease, 0, len(m.leases))
	for _, l := range m.leases {
		ls = append(ls, l)
	}
	m.mu.Unlock()
	for _, l := range ls {
		if l.expiry != nil {
			l.expiry.Stop()
		}
		m.countSuspended(l, false)
		l.mu.Lock()
		c, state := l.client, l.state
		l.client = nil
		l.mu.Unlock()
		if c != nil {
			_ = c.Close()
		}
		if state != LeaseEnding && state != LeaseGone {
			// Its pod stays for the next daemon: no longer held here.
			m.unhold(l)
		}
	}
	if m.stop != nil {
		m.stop()
	}
	m.wg.Wait()
}

// Logger is the logger the manager logs to (Options.Logger).
func (m *Manager) Logger() *slog.Logger { return m.log }

// base is the context of the manager's background work: it ends when
// Close begins.
func (m *Manager) base() context.Context {
	if m.stopping == nil {
		return context.Background()
	}
	return m.stopping
}

// adoptKept takes over kept lease r of the journal whose pod (pod, err of
// its get) is gone, being deleted, or was created again under its name by
// a resume: it is suspended (its pod waited gone at its resume) while its
// claim is there, or adopted with the lease's pod of today. kept is false
// when adopt's own way applies (no claim: the lease is forgotten or
// reaped as any other).
func (m *Manager) adoptKept(ctx context.Context, r *leasepod.Record, pod *corev1.Pod, err error, now time.Time) (kept bool, _ error) {
	gone := apierrors.IsNotFound(err)
	if err != nil && !gone {
		return false, nil
	}
	if !gone && pod.DeletionTimestamp == nil {
		if pod.Labels[leasepod.LabelLease] != r.ID {
			return false, nil
		}
		// Its suspend never deleted it, or a resume whose daemon ended
		// before it journaled the pod created it.
		r.PodUID, r.Suspended = string(pod.UID), false
		return false, m.j.put(*r)
	}
	if _, cerr := m.cs.CoreV1().PersistentVolumeClaims(r.Namespace).Get(ctx, r.ID, metav1.GetOptions{}); cerr != nil {
		return false, nil
	}
	r.PodUID, r.Suspended = "", true
	if err := m.j.put(*r); err != nil {
		return true, err
	}
	l := m.track(*r)
	l.mu.Lock()
	l.state = LeaseSuspended
	l.mu.Unlock()
	if !now.Before(r.ExpiresAt) {
		m.releaseAsync(l, EndExpired)
		return true, nil
	}
	m.countSuspended(l, true)
	m.log.Info("sandbox lease adopted suspended: its claim is kept", slog.String("lease", r.ID), slog.String("namespace", r.Namespace))
	return true, nil
}
