package kubeexec

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/pcsync/pcsync/internal/lib/podinformer"
	"github.com/pcsync/pcsync/pkg/result"
	"github.com/pcsync/pcsync/pkg/runs"
	"github.com/pcsync/pcsync/pkg/secretcheck"
	"github.com/pcsync/pcsync/pkg/tenantns"
)

// Executor runs each run as a Kubernetes Job. It implements runs.Executor.
// Create it with New; it lives until the context given to New ends, and
// leaves every Job running then (the next daemon adopts them).
type Executor struct {
	// ctx bounds the executor's goroutines (informers, handles, cancels);
	// it is the daemon's lifetime, not a request's.
	ctx    context.Context
	client kubernetes.Interface
	logs   *logPool
	// queue holds the keys (namespace/name of the Job) of runs to look
	// at; stepWorkers workers take them (see work).
	queue workqueue.TypedDelayingInterface[string]
	// window bounds the runs being created at once (MaxConcurrentStarts
	// is its ceiling) and adapts to the API server's pushback.
	window *startWindow
	// journal records each run before its Job is created.
	journal *journal
	opts    Options
	tracker *tracker
	// tenants confirms that a run's namespace is its company's.
	tenants *tenantns.Guard
	// credentials confirms that the Secrets of a run's credentials exist.
	credentials *secretcheck.Guard
	// stopped is closed once the executor has stopped after ctx ended
	// (see Wait).
	stopped chan struct{}
}

// syncTimeout bounds the informers' first list.
const syncTimeout = 2 * time.Minute

// stepWorkers is how many goroutines look at runs after watch events.
const stepWorkers = 4

// New starts the executor's watches (Jobs labelled
// app.kubernetes.io/managed-by=pcsync, FailedCreate events of Jobs, in every
// namespace; pcsync's pods from Options.Pods) and waits until they have
// listed what exists, so that Adopt finds the Jobs of an earlier daemon.
// cfg is the cluster access (a client for Jobs, Secrets and the watches,
// and separate connections for log streams). The executor stops when ctx
// ends.
func New(ctx context.Context, cfg *rest.Config, opts Options) (*Executor, error) {
	opts.complete()
	if opts.StateDir == "" {
		return nil, errors.New("kubernetes executor: no state directory")
	}
	window := newStartWindow(opts.MaxConcurrentStarts).withMetrics(opts.WindowMetrics)
	window.slow = opts.SlowCreate
	ccfg := rest.CopyConfig(cfg)
	ccfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return pushbackTransport{next: rt, window: window} })
	client, err := kubernetes.NewForConfig(ccfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes executor: cluster access: %w", err)
	}
	j, err := openJournal(opts.StateDir, opts.Logger)
	if err != nil {
		return nil, fmt.Errorf("kubernetes executor: %w", err)
	}
	pods, own, err := opts.pods(ctx, client)
	if err != nil {
		j.close()
		return nil, fmt.Errorf("kubernetes executor: %w", err)
	}
	t := newTracker(client, pods)
	if err = t.start(ctx, syncTimeout); err != nil {
		j.close()
		return nil, fmt.Errorf("kubernetes executor: %w", err)
	}
	logs, err := newLogPool(cfg, opts.LogStreamsPerConnection)
	if err != nil {
		j.close()
		return nil, fmt.Errorf("kubernetes executor: %w", err)
	}
	e := &Executor{ctx: ctx, client: client, logs: logs, window: window, journal: j, opts: opts, tracker: t,
		tenants: tenantns.New(client, 0), credentials: secretcheck.NewGuard(client, secretcheck.DefaultOptions()),
		queue: workqueue.NewTypedDelayingQueueWithConfig(workqueue.TypedDelayingQueueConfig[string]{
			Name: "kubeexec_runs", MetricsProvider: opts.QueueMetrics,
		}), stopped: make(chan struct{})}
	var workers sync.WaitGroup
	for range stepWorkers {
		workers.Go(e.work)
	}
	context.AfterFunc(ctx, func() {
		defer close(e.stopped)
		e.queue.ShutDown()
		workers.Wait()
		_ = j.close()
		t.stop()
		if own != nil {
			own.Stop()
		}
	})
	return e, nil
}

// Wait returns once the executor has stopped after the context given to
// New ended: its workers returned, its journal closed, its Job and Event
// watches ended (and its own pod informer, without Options.Pods). The
// runs' Jobs go on; a handle still followed ends with that context too.
func (e *Executor) Wait() { <-e.stopped }

// work takes run keys off the queue and steps their handles until the
// queue shuts down. A step that asks for a recheck puts its key back after
// that delay; the queue keeps one entry per key, at the earliest time
// asked.
func (e *Executor) work() {
	for e.stepNext() {
	}
}

// stepNext steps the handle of the next key off the queue; false once the
// queue shuts down.
func (e *Executor) stepNext() bool {
	key, shutdown := e.queue.Get()
	if shutdown {
		return false
	}
	defer e.queue.Done(key)
	if h := e.tracker.sub(key); h != nil {
		if d := h.step(); d > 0 {
			e.queue.AddAfter(key, d)
		}
	}
	return true
}

// Name implements runs.Executor.
func (e *Executor) Name() string { return "kubernetes" }

// Running returns how many runs of an agent hold a slot in the cluster now:
// Jobs this executor is creating or following, and unfinished Jobs of the
// agent that an earlier daemon started and nobody has adopted yet.
func (e *Executor) Running(namespace, agent string) int {
	return e.tracker.occupied(agentKey{namespace, agent})
}

// Adopt implements runs.Executor. A run whose Job exists and carries the
// nonce of the run's marker (and the UID recorded when its create was
// answered) is followed from where it is (the Secret is created again if an
// earlier daemon stopped before creating it, and the Job's UID recorded if
// the marker has none); a Job under the run's name without them is not
// pcsync's and fails the run, left in place (see checkOwner), unless it is
// the finished Job of an earlier run of the request (see earlierRun), which
// Start replaces. A run with a marker but no Job ended while no daemon
// watched: its handle reports failed (or cancelled, when <name>.cancel
// exists) saying so. A run with neither was never started.
func (e *Executor) Adopt(ctx context.Context, r *runs.Run) (runs.Handle, error) {
	log := e.opts.Logger.With(r.LogAttrs()...)
	in, err := NewInput(r, e.opts.Environ(), e.opts.Build)
	if err != nil {
		return nil, err
	}
	ns, name := in.Namespace(), in.JobName()
	if job := e.tracker.job(ns, name); job != nil {
		if req := job.Annotations[AnnotationRequest]; req != in.RequestFile {
			res := r.NewResult()
			res.Fail(result.StatusRejected, result.ErrInvalidRequest, fmt.Sprintf(
				"Job/%s/%s belongs to request %q: the runId %q of company %s agent %s is taken",
				ns, name, req, r.RunID, r.Company.Slug(), r.Agent.Name))
			now := time.Now().UTC()
			res.FinishedAt = &now
			return &doneHandle{ending: runs.Ending{Result: res}}, nil
		}
		m, ok := e.journal.get(r.Name())
		if err := checkOwner(job, m, ok); err != nil {
			if e.earlierRun(job) && !m.Created {
				// Kept from an earlier run of the request, whose result
				// was deleted to run it again: Start replaces it.
				log.Info("the run's name holds the finished Job of an earlier run of this request; starting the run again", slog.String("job", ns+"/"+name))
				return nil, runs.ErrNotStarted
			}
			log.Error("not adopting a Job that pcsync did not create for this run", slog.Any("error", err))
			res := r.NewResult()
			res.Fail(result.StatusFailed, result.ErrInternal, err.Error())
			now := time.Now().UTC()
			res.FinishedAt = &now
			return &doneHandle{ending: runs.Ending{Result: res}, journal: e.journal, name: r.Name()}, nil
		}
		repaired := true
		if !jobFinished(job) && !m.Created {
			// The daemon that created the Job may have stopped before its
			// Secret.
			repaired = e.repairSecret(ctx, log, in, job)
		}
		if ok && m.UID == "" && repaired {
			// Adopted by its nonce (the create was not answered, or the
			// journal is older than UIDs): from now on its UID is the proof.
			if err := e.journal.created(r.Name(), job.UID); err != nil {
				log.Warn("cannot record the adopted Job's UID in the run journal", slog.Any("error", err))
			}
		}
		log.Info("adopting the run's Job", slog.String("job", ns+"/"+name))
		h := e.newHandle(r, in, job.DeepCopy())
		h.start()
		return h, nil
	}
	m, ok := e.journal.get(r.Name())
	if !ok {
		return nil, runs.ErrNotStarted
	}
	if !m.Created && time.Since(m.CreatedAt) < neverCreatedWithin(in) {
		// Recorded, its create never answered, and too recent for a Job
		// to have been created, finished and removed by its TTL: the
		// daemon stopped between the record and the create. Started now
		// (with the recorded nonce: the old create, if it reaches the
		// server after all, makes a Job that Start recognises).
		log.Info("the run was recorded but its Job never created (the daemon stopped in between); starting it")
		return nil, runs.ErrNotStarted
	}
	res := r.NewResult()
	now := time.Now().UTC()
	res.SetTimes(m.CreatedAt, now)
	res.Job = &result.Job{Namespace: ns, Name: name}
	if _, err := os.Stat(r.Paths.Cancel()); err == nil {
		res.Fail(result.StatusCancelled, result.ErrCancelled, fmt.Sprintf(
			"cancelled: Job/%s/%s is gone (deleted on the cancel request before the daemon stopped)", ns, name))
	} else {
		res.Fail(result.StatusFailed, result.ErrInternal, fmt.Sprintf(
			"Job/%s/%s of this run (started %s) is gone and left no trace of how it ended: it was deleted, or removed by its TTL while no daemon watched; the run is not started again",
			ns, name, m.CreatedAt.Format(time.RFC3339)))
	}
	log.Warn("the run's Job is gone", slog.String("job", ns+"/"+name), slog.String("status", string(res.Status)))
	return &doneHandle{ending: runs.Ending{Result: res}, journal: e.journal, name: r.Name()}, nil
}

// neverCreatedWithin is how long after a run's record a missing Job, whose
// create was never answered, proves that it was never created: a Job lives
// at least until it finishes plus its ttlSecondsAfterFinished. Only someone
// deleting the Job by hand within that time is mistaken for a Job never
// created (the run is then started once more). Zero when the company's
// Jobs have no TTL to go by.
func neverCreatedWithin(in Input) time.Duration {
	ttl := in.Model.Jobs(in.Company).TTLSecondsAfterFinished
	if ttl == nil || *ttl <= 0 {
		return 0
	}
	return time.Duration(*ttl) * time.Second
}

// repairSecret creates the run's Secret when it is missing: an earlier
// daemon stopped between creating the Job and its Secret. It creates it
// without looking first (pcsync holds create on Secrets, not get): an
// AlreadyExists answer means the Secret is there. It says whether the
// Secret is there now.
func (e *Executor) repairSecret(ctx context.Context, log *slog.Logger, in Input, job *batchv1.Job) bool {
	sec, err := BuildSecret(in, job, e.opts.Build)
	if err == nil {
		_, err = e.client.CoreV1().Secrets(job.Namespace).Create(ctx, sec, metav1.CreateOptions{})
	}
	switch {
	case isAlreadyExists(err):
	case err != nil:
		log.Warn("cannot create the missing Secret of the adopted Job; its pod waits for it", slog.Any("error", fmt.Errorf("Secret/%s/%s create failed: %w", job.Namespace, job.Name, err)))
		return false
	default:
		log.Info("created the missing Secret of the adopted Job")
	}
	return true
}

// pods is the pod informer of Options.Pods, else one of the executor's
// own (also returned as own), started now and stopped with ctx.
func (o Options) pods(ctx context.Context, client kubernetes.Interface) (pods cache.SharedIndexInformer, own *podinformer.Informer, err error) {
	if o.Pods != nil {
		return o.Pods, nil, nil
	}
	inf := podinformer.New(client, podinformer.Options{SyncTimeout: syncTimeout})
	if err := inf.Start(ctx); err != nil {
		inf.Stop()
		return nil, nil, err
	}
	return inf, inf, nil
}

var _ runs.Executor = (*Executor)(nil)
