package kubeexec

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pcsync/pcsync/pkg/adapters"
	"github.com/pcsync/pcsync/pkg/config"
	"github.com/pcsync/pcsync/pkg/egressproxy/agentenv"
	"github.com/pcsync/pcsync/pkg/egressproxy/inject"
	"github.com/pcsync/pcsync/pkg/result"
	"github.com/pcsync/pcsync/pkg/runs"
	"github.com/pcsync/pcsync/pkg/tenantns"
)

// Start implements runs.Executor. It builds the Job and the Secret, waits
// for a slot by the cluster's count (see Running; the daemon's own count
// already allowed the run) and for a place in the start window (see
// Options.MaxConcurrentStarts), records the run in the run journal (one
// write and fdatasync for all the runs starting at that moment), creates
// the Job and then the Secret owned by it. The pod cannot start before the Secret
// exists (its volume and env refer to it and are not optional), and a daemon
// that stops between the two requests creates the Secret when it adopts the
// Job.
//
// A run that uses its company's credentials (spec.credentials) is failed
// before its Job is created when a credential's Secret does not exist
// (checkCredentials, credentialsExist).
//
// Each of those is a step of a start (below); a step that fails undoes the
// ones before it, newest first (rollback), and Start returns its error.
func (e *Executor) Start(ctx context.Context, r *runs.Run) (runs.Handle, error) {
	s, err := e.newStart(ctx, r)
	if err != nil {
		return nil, err
	}
	for _, step := range []func(context.Context) error{
		s.reserve,          // a slot of the agent's concurrency, by the cluster's count
		s.enterWindow,      // a place in the start window
		s.checkCredentials, // the credentials' Secrets exist: asked now, answered before the Job
		s.journalStart,     // the run's start record (its nonce) on disk
		s.credentialsExist, // the answer: a missing Secret fails the run here
		s.proxyReady,       // an image without pcsync: its proxy up from zero first
		s.createJob,        // the Job, or the run's own Job found under its name
		s.createSecret,     // the Secret, owned by the Job
	} {
		if err := step(ctx); err != nil {
			return nil, s.rollback(err)
		}
	}
	return s.follow(), nil
}

// start is one run being started: what Start built, what its steps did, and
// how to undo each of them.
type start struct {
	e             *Executor
	r             *runs.Run
	log           *slog.Logger
	in            Input
	job           *batchv1.Job
	sec           *corev1.Secret
	ns, name, key string
	// m is the run's start record (journalStart).
	m marker
	// leaveWindow gives the start window's place back (enterWindow).
	leaveWindow func()
	// credentials receives the answer of checkCredentials (nil when the
	// run uses no credential).
	credentials chan error
	// created is the run's Job as the API server answered (createJob).
	created *batchv1.Job
	// undo takes back the steps done so far, in the order they were
	// done; an undo that fails returns why (only deleting the Job can).
	undo []func() error
}

// newStart builds the run's Job and Secret and checks that the run's
// namespace is its company's tenant namespace. Nothing is reserved or
// created yet.
func (e *Executor) newStart(ctx context.Context, r *runs.Run) (*start, error) {
	log := e.opts.Logger.With(r.LogAttrs()...)
	b := e.opts.Build
	in, err := NewInput(r, e.opts.Environ(), b)
	if err != nil {
		return nil, err
	}
	var ip string
	if in.Proxy, ip, err = proxyVars(e.opts.ProxyAddresses, in); err != nil {
		return nil, &runs.StartError{Code: result.ErrInvalidRequest, Err: fmt.Errorf("no Job created: %w", err)}
	}
	if in.Proxy != nil && e.opts.Hosts != nil && in.APIURL != "" {
		// The pod has no cluster DNS: the server's name is in its
		// /etc/hosts. Without it the run goes on; only the agent's calls
		// to Paperclip fail, which the warning names.
		if in.HostAliases, err = e.opts.Hosts.Aliases(ctx, in.APIURL); err != nil {
			log.Warn("the Paperclip server's address was not found: the agent pod, which has no cluster DNS in egress mode proxy, cannot reach it by name", slog.Any("error", err))
		}
	}
	if ip != "" && len(in.Company.Spec.Credentials) > 0 {
		token, err := inject.NewToken()
		if err != nil {
			return nil, err
		}
		in.Credentials = agentenv.CredentialsFor(in.Company, in.Agent.Adapter, ip, token)
	}
	if ip != "" && e.opts.ProxyScale != nil {
		// The proxy starts while the run's pod does; pcsync init waits
		// for it (an image without pcsync: waitProxy, before the Job).
		in.WaitProxy = !e.opts.ProxyScale.Need(in.Namespace())
	}
	in.Command.Args = adapters.WithBaseURL(in.Agent.Adapter, in.Command.Args, in.envValues(b))
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
	return &start{e: e, r: r, log: log, in: in, job: job, sec: sec, ns: ns, name: name, key: jobKey(ns, name)}, nil
}

// did records how to undo a step that succeeded.
func (s *start) did(undo func() error) { s.undo = append(s.undo, undo) }

// rollback undoes every step done, newest first, and returns err, saying
// what became of the Job when one was created.
func (s *start) rollback(err error) error {
	var failed []error
	for i := len(s.undo) - 1; i >= 0; i-- {
		if uerr := s.undo[i](); uerr != nil {
			failed = append(failed, uerr)
		}
	}
	s.undo = nil
	switch {
	case s.created == nil:
		return err
	case len(failed) > 0:
		return fmt.Errorf("%w (and %w)", err, errors.Join(failed...))
	default:
		return fmt.Errorf("%w (the Job was deleted)", err)
	}
}

// reserve waits until the agent has a free slot by the cluster's count and
// takes it for the run's Job.
func (s *start) reserve(ctx context.Context) error {
	limit := max(1, s.r.Agent.Concurrency)
	if err := s.e.tracker.reserve(ctx, agentKey{s.ns, s.r.Agent.Name}, s.key, limit, func(n int) {
		s.log.Info("waiting for a slot: the cluster already runs the agent's concurrency in Jobs", slog.Int("running", n), slog.Int("concurrency", limit))
	}); err != nil {
		return err
	}
	s.did(func() error { s.e.tracker.unreserve(s.key); return nil })
	return nil
}

// enterWindow waits for a place in the start window (after the concurrency
// wait, which may be long and must not hold up other agents' runs). The
// place is given back by rollback, or by follow once the run is followed.
func (s *start) enterWindow(ctx context.Context) error {
	release, err := s.e.window.acquire(ctx)
	if err != nil {
		return err
	}
	s.leaveWindow = release
	s.did(func() error { release(); return nil })
	return nil
}

// journalStart records the run, with its nonce, before the Job exists, so a
// daemon that stops right after the create still recognises the Job as its
// own. A run recorded by a daemon that stopped before its create keeps its
// nonce: that create may still reach the server.
func (s *start) journalStart(context.Context) error {
	j := s.e.journal
	nonce := newNonce()
	if old, ok := j.get(s.r.Name()); ok && old.Nonce != "" {
		nonce = old.Nonce
	}
	if s.job.Annotations == nil {
		s.job.Annotations = map[string]string{}
	}
	s.job.Annotations[AnnotationNonce] = nonce
	s.m = marker{RunID: s.r.RunID, Namespace: s.ns, Job: s.name, Request: s.in.RequestFile, Result: s.r.Paths.Result(),
		CreatedAt: time.Now().UTC(), Nonce: nonce}
	if err := j.start(s.r.Name(), s.m); err != nil {
		j.drop(s.r.Name())
		return err
	}
	s.did(func() error {
		if err := j.end(s.r.Name()); err != nil {
			s.log.Warn("cannot drop the run from the run journal", slog.Any("error", err))
		}
		return nil
	})
	return nil
}

// createJob creates the run's Job. A create cut off by the API server going
// away is repeated when it is back; if the first one was carried out, the
// second finds the Job (AlreadyExists, the run's nonce) and follows it.
func (s *start) createJob(ctx context.Context) error {
	e, ns, name, key := s.e, s.ns, s.name, s.key
	var created *batchv1.Job
	err := untilAnswered(ctx, s.log, "create Job/"+key, func() (err error) {
		sent := time.Now()
		created, err = e.client.BatchV1().Jobs(ns).Create(ctx, s.job, metav1.CreateOptions{})
		e.window.observe(err, time.Since(sent))
		return err
	})
	if err == nil {
		// A new run starts a new log.
		if f, _, err := openLog(s.r.Paths.Log(), false); err != nil {
			s.log.Warn("cannot create the run's log file", slog.Any("error", err))
		} else {
			f.Close()
		}
	} else if isAlreadyExists(err) {
		// Created by an earlier daemon that stopped before recording it,
		// by a second request with the same runId, or kept from an
		// earlier run of this request.
		created, err = s.existingJob(ctx, true)
	}
	if err != nil {
		var refused *runs.StartError
		switch {
		case errors.As(err, &refused):
			return err
		case isNotFound(err):
			return fmt.Errorf("Job/%s/%s create failed: %w (the tenant manifests are not applied: run pcsync apply)", ns, name, err)
		case apierrors.IsForbidden(err) && strings.Contains(err.Error(), "cannot create resource"):
			return fmt.Errorf("Job/%s/%s create failed: %w (pcsync creates Jobs only in tenant namespaces whose RoleBinding pcsync grants it the ClusterRole pcsync-tenant: the tenant manifests are not applied, or Settings spec.pcsync.serviceAccount does not name the ServiceAccount pcsync runs as; run pcsync apply, and pcsync doctor)", ns, name, err)
		}
		return fmt.Errorf("Job/%s/%s create failed: %w", ns, name, err)
	}
	s.created = created
	s.did(func() error {
		// Without its Secret the pod would wait for ever: take the Job back.
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.opts.DeleteTimeout)
		defer cancel()
		return e.deleteJob(dctx, ns, name, created.UID)
	})
	return nil
}

// existingJob reads the Job that holds the run's name and follows it if it
// is the run's own (its request and the run's nonce); a Job of another
// request, or one pcsync did not create, is a runs.StartError. The finished
// Job of an earlier run of the request is replaced when replace is set.
func (s *start) existingJob(ctx context.Context, replace bool) (*batchv1.Job, error) {
	var job *batchv1.Job
	err := untilAnswered(ctx, s.log, "get Job/"+s.key, func() (err error) {
		job, err = s.e.client.BatchV1().Jobs(s.ns).Get(ctx, s.name, metav1.GetOptions{})
		return err
	})
	if err != nil {
		return nil, err
	}
	if req := job.Annotations[AnnotationRequest]; req != s.in.RequestFile {
		return nil, &runs.StartError{Code: result.ErrInvalidRequest, Err: fmt.Errorf(
			"Job/%s/%s already exists for request %q: the runId %q of company %s agent %s is taken",
			s.ns, s.name, req, s.r.RunID, s.r.Company.Slug(), s.r.Agent.Name)}
	}
	if err := checkOwner(job, s.m, true); err != nil {
		if replace && s.e.earlierRun(job) {
			return s.replaceJob(ctx, job)
		}
		return nil, &runs.StartError{Code: result.ErrInternal, Err: err}
	}
	s.log.Info("the run's Job exists already; following it")
	return job, nil
}

// earlierRun says whether job, which holds the run's name and is not this
// start's (checkOwner), is the finished Job of an earlier run of the same
// request, kept until its ttlSecondsAfterFinished: the request was made
// pending again (its result deleted) to run it once more. It must have
// finished, or its pod (the cache's) must be done (the Job controller
// marks the Job finished a moment later): a Job still running is never
// replaced.
func (e *Executor) earlierRun(job *batchv1.Job) bool {
	if job.DeletionTimestamp != nil || job.Annotations[AnnotationNonce] == "" {
		return false
	}
	if jobFinished(job) {
		return true
	}
	p := e.tracker.pod(jobKey(job.Namespace, job.Name))
	if p == nil {
		return false
	}
	ref := metav1.GetControllerOf(p)
	return ref != nil && ref.UID == job.UID && (p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed)
}

// replaceJob deletes the finished Job of an earlier run of the request (see
// earlierRun; by its UID) and creates the run's own.
func (s *start) replaceJob(ctx context.Context, old *batchv1.Job) (*batchv1.Job, error) {
	s.log.Info("the Job of an earlier run of this request is kept under the run's name; replacing it", slog.String("job", s.key))
	dctx, cancel := context.WithTimeout(ctx, s.e.opts.DeleteTimeout)
	err := s.e.deleteJob(dctx, s.ns, s.name, old.UID)
	cancel()
	if err != nil {
		return nil, err
	}
	var created *batchv1.Job
	err = untilAnswered(ctx, s.log, "create Job/"+s.key, func() (err error) {
		created, err = s.e.client.BatchV1().Jobs(s.ns).Create(ctx, s.job, metav1.CreateOptions{})
		return err
	})
	if isAlreadyExists(err) {
		return s.existingJob(ctx, false)
	}
	return created, err
}

// createSecret creates the run's Secret, owned by its Job; one that exists
// already (a create repeated after the server went away) is the run's.
func (s *start) createSecret(ctx context.Context) error {
	e := s.e
	s.sec.OwnerReferences[0].UID = s.created.UID
	err := untilAnswered(ctx, s.log, "create Secret/"+s.key, func() error {
		sent := time.Now()
		_, err := e.client.CoreV1().Secrets(s.ns).Create(ctx, s.sec, metav1.CreateOptions{})
		e.window.observe(err, time.Since(sent))
		return err
	})
	if err != nil && !isAlreadyExists(err) {
		return fmt.Errorf("Secret/%s/%s create failed: %w", s.ns, s.name, err)
	}
	return nil
}

// follow ends a start whose steps all succeeded: it records the Job's UID
// in the run journal, starts the run's handle and gives the start window's
// place back.
func (s *start) follow() *handle {
	defer s.leaveWindow()
	if err := s.e.journal.created(s.r.Name(), s.created.UID); err != nil {
		s.log.Warn("cannot record the Job's and Secret's creation in the run journal", slog.Any("error", err))
	}
	s.log.Info("Job created", slog.String("job", s.ns+"/"+s.name))
	h := s.e.newHandle(s.r, s.in, s.created)
	h.start()
	return h
}

// proxyVars are the egress proxy's variables of the run (egress mode
// proxy and addresses set), from the tenant's proxy Service's ClusterIP.
func proxyVars(addrs ProxyAddresses, in Input) (map[string]string, string, error) {
	if addrs == nil || in.Model.EgressMode(in.Company) != config.EgressProxy {
		return nil, "", nil
	}
	ip, err := addrs.ClusterIP(in.Namespace())
	if err != nil {
		return nil, "", fmt.Errorf("company %s is in egress mode proxy: %w", in.Company.Slug(), err)
	}
	return agentenv.Vars(in.Model, in.Company, ip, in.Agent.Name), ip, nil
}
