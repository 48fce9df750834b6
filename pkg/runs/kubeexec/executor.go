package kubeexec

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/workqueue"

	"github.com/pcsync/pcsync/internal/tenantns"
	"github.com/pcsync/pcsync/pkg/result"
	"github.com/pcsync/pcsync/pkg/runs"
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
}

// syncTimeout bounds the informers' first list.
const syncTimeout = 2 * time.Minute

// stepWorkers is how many goroutines look at runs after watch events.
const stepWorkers = 4

// New starts the executor's watches (Jobs and Pods labelled
// app.kubernetes.io/managed-by=pcsync, FailedCreate events of Jobs, in every
// namespace) and waits until they have listed what exists, so that Adopt
// finds the Jobs of an earlier daemon. cfg is the cluster access (a client
// for Jobs, Secrets and the watches, and separate connections for log
// streams). The executor stops when ctx ends.
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
	t := newTracker(client)
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
		tenants: tenantns.New(client, 0),
		queue: workqueue.NewTypedDelayingQueueWithConfig(workqueue.TypedDelayingQueueConfig[string]{
			Name: "kubeexec_runs", MetricsProvider: opts.QueueMetrics,
		})}
	for range stepWorkers {
		go e.work()
	}
	context.AfterFunc(ctx, func() {
		e.queue.ShutDown()
		_ = j.close()
	})
	return e, nil
}

// work takes run keys off the queue and steps their handles until the
// queue shuts down. A step that asks for a recheck puts its key back after
// that delay; the queue keeps one entry per key, at the earliest time
// asked.
func (e *Executor) work() {
	for {
		key, shutdown := e.queue.Get()
		if shutdown {
			return
		}
		if h := e.tracker.sub(key); h != nil {
			if d := h.step(); d > 0 {
				e.queue.AddAfter(key, d)
			}
		}
		e.queue.Done(key)
	}
}

// Name implements runs.Executor.
func (e *Executor) Name() string { return "kubernetes" }

// Running returns how many runs of an agent hold a slot in the cluster now:
// Jobs this executor is creating or following, and unfinished Jobs of the
// agent that an earlier daemon started and nobody has adopted yet.
func (e *Executor) Running(namespace, agent string) int {
	return e.tracker.occupied(agentKey{namespace, agent})
}

// Start implements runs.Executor. It builds the Job and the Secret, waits
// for a slot by the cluster's count (see Running; the daemon's own count
// already allowed the run) and for a place in the start window (see
// Options.MaxConcurrentStarts), records the run in the run journal (one
// write and fdatasync for all the runs starting at that moment), creates
// the Job and then the Secret owned by it. The pod cannot start before the Secret
// exists (its volume and env refer to it and are not optional), and a daemon
// that stops between the two requests creates the Secret when it adopts the
// Job.
func (e *Executor) Start(ctx context.Context, r *runs.Run) (runs.Handle, error) {
	log := e.opts.Logger.With(r.LogAttrs()...)
	b := e.opts.Build
	in, err := NewInput(r, e.opts.Environ(), b)
	if err != nil {
		return nil, err
	}
	for _, w := range in.Command.Warnings {
		log.Warn(w)
	}
	job, err := BuildJob(in, b)
	if err != nil {
		return nil, &runs.StartError{Code: result.ErrInvalidRequest, Err: err}
	}
	sec, err := BuildSecret(in, job, b)
	if err != nil {
		return nil, &runs.StartError{Code: result.ErrInvalidRequest, Err: err}
	}
	ns, name := job.Namespace, job.Name
	if err := e.tenants.Check(ctx, ns, r.Company.Slug()); errors.Is(err, tenantns.ErrNotTenant) {
		return nil, &runs.StartError{Code: result.ErrInvalidRequest, Err: fmt.Errorf("no Job created: %w", err)}
	} else if err != nil {
		return nil, err
	}
	key := jobKey(ns, name)
	limit := max(1, r.Agent.Concurrency)
	if err := e.tracker.reserve(ctx, agentKey{ns, r.Agent.Name}, key, limit, func(n int) {
		log.Info("waiting for a slot: the cluster already runs the agent's concurrency in Jobs", slog.Int("running", n), slog.Int("concurrency", limit))
	}); err != nil {
		return nil, err
	}
	// Then a place in the start window (after the concurrency wait, which
	// may be long and must not hold up other agents' runs).
	release, err := e.window.acquire(ctx)
	if err != nil {
		e.tracker.unreserve(key)
		return nil, err
	}
	defer release()
	// The nonce is recorded before the Job exists, so a daemon that stops
	// right after the create still recognises the Job as its own. A run
	// recorded by a daemon that stopped before its create keeps its nonce:
	// that create may still reach the server.
	nonce := newNonce()
	if old, ok := e.journal.get(r.Name()); ok && old.Nonce != "" {
		nonce = old.Nonce
	}
	if job.Annotations == nil {
		job.Annotations = map[string]string{}
	}
	job.Annotations[AnnotationNonce] = nonce
	m := marker{RunID: r.RunID, Namespace: ns, Job: name, Request: in.RequestFile, Result: r.Paths.Result(),
		CreatedAt: time.Now().UTC(), Nonce: nonce}
	if err := e.journal.start(r.Name(), m); err != nil {
		e.journal.drop(r.Name())
		e.tracker.unreserve(key)
		return nil, err
	}
	undo := func() {
		e.tracker.unreserve(key)
		if err := e.journal.end(r.Name()); err != nil {
			log.Warn("cannot drop the run from the run journal", slog.Any("error", err))
		}
	}
	// A create cut off by the API server going away is repeated when it is
	// back; if the first one was carried out, the second finds the Job
	// (AlreadyExists, the run's nonce) and follows it.
	var created *batchv1.Job
	err = untilAnswered(ctx, log, "create Job/"+key, func() (err error) {
		sent := time.Now()
		created, err = e.client.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{})
		e.window.observe(err, time.Since(sent))
		return err
	})
	if err == nil {
		// A new run starts a new log.
		if f, _, err := openLog(r.Paths.Log(), false); err != nil {
			log.Warn("cannot create the run's log file", slog.Any("error", err))
		} else {
			f.Close()
		}
	} else if isAlreadyExists(err) {
		// Created by an earlier daemon that stopped before recording it,
		// or by a second request with the same runId.
		err = untilAnswered(ctx, log, "get Job/"+key, func() (err error) {
			created, err = e.client.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
			return err
		})
		if err == nil && created.Annotations[AnnotationRequest] != in.RequestFile {
			undo()
			return nil, &runs.StartError{Code: result.ErrInvalidRequest, Err: fmt.Errorf(
				"Job/%s/%s already exists for request %q: the runId %q of company %s agent %s is taken",
				ns, name, created.Annotations[AnnotationRequest], r.RunID, r.Company.Slug(), r.Agent.Name)}
		}
		if err == nil {
			if oerr := checkOwner(created, m, true); oerr != nil {
				undo()
				return nil, &runs.StartError{Code: result.ErrInternal, Err: oerr}
			}
			log.Info("the run's Job exists already; following it")
		}
	}
	if err != nil {
		undo()
		if isNotFound(err) {
			return nil, fmt.Errorf("Job/%s/%s create failed: %w (the tenant manifests are not applied: run pcsync apply)", ns, name, err)
		}
		if apierrors.IsForbidden(err) && strings.Contains(err.Error(), "cannot create resource") {
			return nil, fmt.Errorf("Job/%s/%s create failed: %w (pcsync creates Jobs only in tenant namespaces whose RoleBinding pcsync grants it the ClusterRole pcsync-tenant: the tenant manifests are not applied, or Settings spec.pcsync.serviceAccount does not name the ServiceAccount pcsync runs as; run pcsync apply, and pcsync doctor)", ns, name, err)
		}
		return nil, fmt.Errorf("Job/%s/%s create failed: %w", ns, name, err)
	}
	sec.OwnerReferences[0].UID = created.UID
	if err := untilAnswered(ctx, log, "create Secret/"+key, func() error {
		sent := time.Now()
		_, err := e.client.CoreV1().Secrets(ns).Create(ctx, sec, metav1.CreateOptions{})
		e.window.observe(err, time.Since(sent))
		return err
	}); err != nil && !isAlreadyExists(err) {
		// Without its Secret the pod would wait for ever: take the Job back.
		h := &handle{e: e, ns: ns, name: name, uid: created.UID}
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.opts.DeleteTimeout)
		derr := h.deleteJob(dctx)
		cancel()
		undo()
		if derr != nil {
			return nil, fmt.Errorf("Secret/%s/%s create failed: %w (and %v)", ns, name, err, derr)
		}
		return nil, fmt.Errorf("Secret/%s/%s create failed: %w (the Job was deleted)", ns, name, err)
	}
	if err := e.journal.created(r.Name(), created.UID); err != nil {
		log.Warn("cannot record the Job's and Secret's creation in the run journal", slog.Any("error", err))
	}
	log.Info("Job created", slog.String("job", ns+"/"+name))
	h := e.newHandle(r, in, created)
	h.start()
	return h, nil
}

// Adopt implements runs.Executor. A run whose Job exists and carries the
// nonce of the run's marker (and the UID recorded when its create was
// answered) is followed from where it is (the Secret is created again if an
// earlier daemon stopped before creating it, and the Job's UID recorded if
// the marker has none); a Job under the run's name without them is not
// pcsync's and fails the run, left in place (see checkOwner). A run with a marker but no Job ended while no daemon
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

var _ runs.Executor = (*Executor)(nil)
