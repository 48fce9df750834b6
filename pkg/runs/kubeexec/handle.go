package kubeexec

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"os"
	"slices"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/pcsync/pcsync/internal/lib/agentpod"
	"github.com/pcsync/pcsync/internal/lib/redact"
	"github.com/pcsync/pcsync/internal/lib/safefile"
	"github.com/pcsync/pcsync/pkg/adapters"
	"github.com/pcsync/pcsync/pkg/procinit"
	"github.com/pcsync/pcsync/pkg/result"
	"github.com/pcsync/pcsync/pkg/runs"
)

// handle follows one run's Job to its end. It implements runs.Handle.
//
// Its life: following (steps on the executor's workers look at the caches
// on every event of the Job, start the log follower once the container
// runs) → finishing (a step found the run final; finish stops the Job if
// the verdict says so, reads the rest of the log and builds the result) →
// finished (Wait returns the result; Release deletes the Secret, leaves the
// finished Job to its TTL and ends the journal record). When the executor stops first (the daemon stops) the
// handle is stopped instead: no more steps, no result; the Job goes on and
// the next daemon adopts it. Every change of state goes through to.
type handle struct {
	// Set by newHandle and never changed; any goroutine reads them.
	e             *Executor
	r             *runs.Run
	ns, name, key string
	uid           types.UID
	log           *slog.Logger
	// red redacts the run's secrets from the log and the result.
	red    *redact.Redactor
	retain bool
	// keepJob: Release leaves the finished Job to its
	// ttlSecondsAfterFinished (see Release).
	keepJob     bool
	memoryLimit string
	// parser reads the agent's log: the follower feeds it, then finish
	// (once the follower is done) asks it for the outcome.
	parser adapters.Parser
	// podDone ends (podEnd) once the pod is done: the follower then reads
	// the log once more without follow. podEnd is safe to call anywhere.
	podDone context.Context
	podEnd  context.CancelFunc
	// done is closed by finish once ending is set.
	done chan struct{}

	// Guarded by mu: steps, finish, Cancel's goroutine, Release and the
	// executor's stop read and write them.
	mu    sync.Mutex
	state handleState
	// cancelAsked: Cancel was called; cancelled: its delete succeeded.
	cancelAsked bool
	cancelled   bool
	jobGone     bool
	// lastJob is the newest state of the Job seen (the create response
	// until the cache has it).
	lastJob *batchv1.Job
	// agentEnded is pcsync init's record, read from the log's last line
	// (the follower sets it), before the kubelet reports the container's
	// end.
	agentEnded *procinit.Record

	// Owned by the step in progress (the work queue never runs two steps
	// of one key at once) and, from finishing on, by finish. The follower
	// goroutine owns logFile once it is started and reports on folDone.
	since     map[string]time.Time
	fol       *follower
	folDone   chan error
	folCancel context.CancelFunc
	logFile   *os.File
	podName   string
	// runningAt is the agent container's start as its Running state said.
	runningAt time.Time
	// watched is what this daemon's watch saw of the container's start and
	// end, to the millisecond.
	watched watchedTimes

	// Set by start before the first step; finish calls it: it unregisters
	// the executor's stop callback once the run is final.
	stopAfter func() bool

	// Written by finish before it closes done; Wait reads it after.
	ending runs.Ending
}

// handleState is where a handle is in its life (see handle).
type handleState string

const (
	// stateFollowing: steps look at the run on every event of its Job.
	stateFollowing handleState = "following"
	// stateFinishing: a step found the run final; finish runs.
	stateFinishing handleState = "finishing"
	// stateFinished: the result is built; Wait returns it.
	stateFinished handleState = "finished"
	// stateStopped: the executor stopped before the run finished; the
	// next daemon adopts the Job.
	stateStopped handleState = "stopped"
)

// handleTransitions lists the changes of state a handle may make.
var handleTransitions = map[handleState][]handleState{
	stateFollowing: {stateFinishing, stateStopped},
	stateFinishing: {stateFinished, stateStopped},
}

// to moves the handle from state from to state next and says whether it
// did: not when the handle is in another state already (a step finding the
// run final and the executor stopping race; the first one wins). A change
// that handleTransitions does not list is a bug in this package: to
// panics.
func (h *handle) to(from, next handleState) bool {
	if !slices.Contains(handleTransitions[from], next) {
		panic(fmt.Sprintf("kubeexec: a run's handle cannot go from %s to %s", from, next))
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.state != from {
		return false
	}
	h.state = next
	return true
}

// following says whether the handle still takes steps.
func (h *handle) following() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.state == stateFollowing
}

func (e *Executor) newHandle(r *runs.Run, in Input, job *batchv1.Job) *handle {
	res := in.Model.AgentResources(in.Agent)
	mem := ""
	if res.Limits != nil && res.Limits.Memory != nil {
		mem = string(*res.Limits.Memory)
	}
	jobs := in.Model.Jobs(in.Company)
	h := &handle{
		e:           e,
		r:           r,
		ns:          job.Namespace,
		name:        job.Name,
		key:         jobKey(job.Namespace, job.Name),
		uid:         job.UID,
		log:         e.opts.Logger.With(append(r.LogAttrs(), slog.String("job", job.Namespace+"/"+job.Name))...),
		retain:      jobs.Retain != nil && *jobs.Retain,
		keepJob:     jobs.TTLSecondsAfterFinished != nil && *jobs.TTLSecondsAfterFinished > 0,
		memoryLimit: mem,
		done:        make(chan struct{}),
		state:       stateFollowing,
		lastJob:     job,
	}
	secrets := append(in.SecretValues(), r.Request.Prompt)
	h.red = redact.New(secrets...)
	h.podDone, h.podEnd = context.WithCancel(context.Background())
	h.parser = r.Adapter.NewParser(adapters.ParserOptions{
		ResumedSessionID: r.Request.SessionID,
		PreviousUsage:    r.PreviousUsage,
		Model:            r.Agent.Model,
		Secrets:          secrets,
	})
	return h
}

// wake makes the handle look at the caches again: its key goes into the
// executor's work queue, which steps each key on one worker at a time and
// once for any number of wakes meanwhile.
func (h *handle) wake() {
	if h.following() {
		h.e.queue.Add(h.key)
	}
}

// Wait implements runs.Handle.
func (h *handle) Wait(ctx context.Context) (runs.Ending, error) {
	select {
	case <-h.done:
		return h.ending, nil
	case <-ctx.Done():
		return runs.Ending{}, ctx.Err()
	}
}

// Cancel implements runs.Handle: it deletes the Job (retrying until it
// succeeds or the run ends); Wait then reports cancelled.
func (h *handle) Cancel() {
	h.mu.Lock()
	if h.cancelAsked || h.state == stateFinished {
		h.mu.Unlock()
		return
	}
	h.cancelAsked = true
	h.mu.Unlock()
	h.log.Info("cancelling the run: deleting its Job")
	go func() {
		// Until the Job is deleted, the run ends or the executor stops.
		ctx, stop := context.WithCancel(h.e.ctx)
		defer stop()
		go func() {
			select {
			case <-h.done:
				stop()
			case <-ctx.Done():
			}
		}()
		_, err := retry(ctx, cancelBackoff, func() (bool, error) {
			dctx, cancel := context.WithTimeout(h.e.ctx, h.e.opts.DeleteTimeout)
			defer cancel()
			err := h.deleteJob(dctx)
			return err == nil, err
		}, func(_ int, err error, in time.Duration) {
			h.log.Warn("cannot delete the Job to cancel the run; trying again", slog.Any("error", err), slog.Duration("in", in))
		})
		if err != nil {
			return
		}
		h.mu.Lock()
		h.cancelled, h.jobGone = true, true
		h.mu.Unlock()
		h.wake()
	}()
}

// cancelBackoff paces Cancel's deletes of the Job: 500 ms, doubling to
// 30 s, then every 30 s.
var cancelBackoff = wait.Backoff{Duration: 500 * time.Millisecond, Factor: 2, Steps: math.MaxInt32, Cap: 30 * time.Second}

// start subscribes the handle to its Job's events and takes its first step.
// When the executor's context ends (the daemon stops), the follower stops
// with it and Wait returns the context's error; the Job goes on and the next
// daemon adopts it.
func (h *handle) start() {
	h.stopAfter = context.AfterFunc(h.e.ctx, func() {
		h.to(stateFollowing, stateStopped)
		h.e.tracker.unsubscribe(h, false)
	})
	// Subscribing takes the first step; stopAfter is set before.
	h.e.tracker.subscribe(h)
}

// step looks at the run once: it starts following the log when the
// container has started, tells the follower when the pod is done, and, when
// the run has ended, hands it to finish. It returns when to look again
// without an event (0: on the next event only).
func (h *handle) step() (recheck time.Duration) {
	ctx := h.e.ctx
	if ctx.Err() != nil || !h.following() {
		return 0
	}
	if h.since == nil {
		h.since = map[string]time.Time{}
	}
	obs := h.observe()
	v := explain(obs)
	cs := agentpod.ContainerStatus(obs.Pod, obs.Container)
	h.watched.observe(cs, obs.Now)
	if obs.Pod != nil {
		h.podName = obs.Pod.Name
		if cs != nil && cs.State.Running != nil && h.runningAt.IsZero() {
			h.runningAt = cs.State.Running.StartedAt.Time
		}
	}
	if v.Started && h.fol == nil && obs.Pod != nil {
		h.startFollower(ctx, obs.Pod.Name)
	}
	if v.PodDone {
		h.podEnd()
	}
	if v.Final {
		if h.to(stateFollowing, stateFinishing) {
			go h.finish(ctx, obs, v)
		}
		return 0
	}
	return v.Recheck
}

// observe gathers what the caches know of the run now.
func (h *handle) observe() observation {
	t := h.e.tracker
	h.mu.Lock()
	cancelled, cancelling := h.cancelled, h.cancelAsked
	last, ended := h.lastJob, h.agentEnded
	h.mu.Unlock()
	o := observation{
		AgentEnded:         ended,
		Cancelled:          cancelled,
		Now:                time.Now(),
		Since:              h.sinceFn,
		Container:          h.e.opts.Build.ContainerName,
		Timeout:            h.r.Timeout,
		TimeoutSource:      h.r.TimeoutSource,
		MemoryLimit:        h.memoryLimit,
		Grace:              h.r.Grace,
		UnschedulableGrace: h.e.opts.UnschedulableGrace,
		QuotaGrace:         h.e.opts.QuotaGrace,
		ConfigErrorGrace:   h.e.opts.ConfigErrorGrace,
	}
	job := t.job(h.ns, h.name)
	if job != nil && h.uid != "" && job.UID != h.uid {
		// Another Job of the same name: ours is gone.
		job = nil
		o.JobDeleted = true
	}
	if d := t.deletedJob(h.key); d != nil && job == nil && (h.uid == "" || d.UID == h.uid) {
		o.JobDeleted = true
		last = d
	}
	if job != nil {
		last = job
		h.mu.Lock()
		h.lastJob = job
		h.mu.Unlock()
	}
	o.Job = last
	if o.JobDeleted && cancelling {
		// The deletion pcsync asked for, seen before the request returned.
		o.Cancelled = true
	}
	if o.JobDeleted {
		h.mu.Lock()
		h.jobGone = true
		h.mu.Unlock()
	}
	if p := t.pod(h.key); p != nil {
		if ref := metav1.GetControllerOf(p); ref != nil && (h.uid == "" || ref.UID == h.uid) {
			o.Pod = p
		}
	}
	o.FailedCreate = t.failedCreate(h.key, string(h.uid))
	return o
}

func (h *handle) sinceFn(key string) time.Time {
	if t, ok := h.since[key]; ok {
		return t
	}
	now := time.Now()
	h.since[key] = now
	return now
}

// startFollower begins copying the pod's log into <name>.log.
func (h *handle) startFollower(ctx context.Context, pod string) {
	f, skip, err := openLog(h.r.Paths.Log(), true)
	if err != nil {
		h.log.Error("cannot open the run's log file; the log is not kept", slog.Any("error", err))
	}
	h.logFile = f
	var out = discard{}.Write
	if f != nil {
		// The follower writes whole lines; each is redacted.
		out = redact.NewLineWriter(f, h.red, 0).Write
	}
	h.fol = &follower{
		src:       podLogs{pool: h.e.logs, namespace: h.ns, pod: pod, container: h.e.opts.Build.ContainerName},
		out:       writerFunc(out),
		parser:    h.parser,
		log:       h.log,
		reconnect: h.e.opts.LogReconnectDelay,
		skip:      skip,
		ended: func(rec procinit.Record) {
			h.log.Debug("the agent's end read from its log (pcsync init)", slog.Int("exitCode", rec.ExitCode),
				slog.Duration("after", time.Since(rec.FinishedAt)))
			h.mu.Lock()
			h.agentEnded = &rec
			h.mu.Unlock()
			h.wake()
		},
	}
	fctx, cancel := context.WithCancel(ctx)
	h.folCancel = cancel
	h.folDone = make(chan error, 1)
	h.log.Debug("following the agent's log", slog.String("pod", pod), slog.Int("linesKept", skip))
	go func() {
		err := h.fol.run(fctx, h.podDone)
		h.closeLog()
		h.folDone <- err
	}()
}

func (h *handle) closeLog() {
	if h.logFile != nil {
		if err := h.logFile.Close(); err != nil {
			h.log.Warn("cannot close the run's log file", slog.Any("error", err))
		}
		h.logFile = nil
	}
}

// finish ends the run: it stops the Job when the verdict says so, reads the
// rest of the log, and builds the result.
func (h *handle) finish(ctx context.Context, obs observation, v verdict) {
	if v.Stop {
		dctx, cancel := context.WithTimeout(ctx, h.e.opts.DeleteTimeout)
		if err := h.deleteJob(dctx); err != nil {
			h.log.Warn("cannot delete the Job of the failed run", slog.Any("error", err))
		} else {
			h.mu.Lock()
			h.jobGone = true
			h.mu.Unlock()
		}
		cancel()
	}
	h.podEnd()
	tail := ""
	fed := 0
	if h.fol != nil {
		select {
		case err := <-h.folDone:
			if err != nil && ctx.Err() == nil {
				h.log.Warn("the end of the agent's log could not be read", slog.Any("error", err))
			}
		case <-ctx.Done():
			h.folCancel()
			<-h.folDone //nolint:errcheck // the follower ends with the cancel's error
		}
		if ctx.Err() != nil {
			h.to(stateFinishing, stateStopped)
			return // the daemon stops: no result; the next daemon adopts the run
		}
		tail = h.fol.stderrTail()
		fed = h.fol.seen
	}
	if fed == 0 {
		// The pod's log is gone (the pod was deleted); what an earlier
		// daemon copied into <name>.log is the best there is.
		if f, _, err := safefile.Open(h.r.Paths.Log()); err == nil {
			_ = adapters.FeedLines(h.parser, f)
			f.Close()
		}
	}
	h.ending = h.buildEnding(obs, v, tail)
	if h.stopAfter != nil {
		h.stopAfter()
	}
	h.e.tracker.unsubscribe(h, true)
	h.to(stateFinishing, stateFinished)
	close(h.done)
}

// buildEnding turns the verdict and the parser's reading of the log into
// the run's result.
func (h *handle) buildEnding(obs observation, v verdict, tail string) runs.Ending {
	po := adapters.ProcessOutcome{
		ExitCode:  v.ExitCode,
		Signal:    v.Signal,
		TimedOut:  v.TimedOut,
		Cancelled: v.Status == result.StatusCancelled,
		Stderr:    tail,
	}
	o := h.parser.Finish(po)
	res := runs.Outcome(h.r, po, o)
	msg := h.red.String(v.Message)
	switch {
	case v.Code != "":
		res.Fail(v.Status, v.Code, msg)
		res.TimedOut = v.TimedOut
	case res.Status == result.StatusFailed && msg != "":
		if o.Failed && o.ErrorMessage != nil && *o.ErrorMessage != "" {
			res.ErrorMessage = result.Ptr(*o.ErrorMessage + "; " + msg)
		} else {
			res.ErrorMessage = result.Ptr(msg + runs.LastLine(h.red.String(tail)))
		}
	}
	t := runTimes{verdict: v, runningAt: h.runningAt, watch: h.watched, now: time.Now(),
		endNow: v.Stop || v.Status == result.StatusCancelled}
	if obs.Job != nil {
		t.created = obs.Job.CreationTimestamp.Time
	}
	started, finished, by := t.resolve()
	res.SetTimes(started, finished)
	res.Job = &result.Job{Namespace: h.ns, Name: h.name, Pod: h.podName, TimedBy: by}
	// Every string of the result, whatever the agent echoed into it.
	res.MapStrings(h.red.String)
	return runs.Ending{Result: res, SessionTotal: o.SessionCumulativeUsage}
}

// earliest returns the earlier of the non-zero times.
func earliest(a, b time.Time) time.Time {
	switch {
	case a.IsZero():
		return b
	case b.IsZero() || a.Before(b):
		return a
	}
	return b
}

// doneHandle is a run that ended before this daemon saw it: its Job is gone.
type doneHandle struct {
	ending runs.Ending
	// journal and name drop the run's marker on Release.
	journal *journal
	name    string
}

// Wait implements runs.Handle.
func (d *doneHandle) Wait(context.Context) (runs.Ending, error) { return d.ending, nil }

// Cancel implements runs.Handle; the run has ended already.
func (d *doneHandle) Cancel() {}

// Release implements runs.Handle.
func (d *doneHandle) Release(context.Context) error {
	return d.journal.end(d.name)
}

type discard struct{}

// Write implements io.Writer, keeping nothing.
func (discard) Write(p []byte) (int, error) { return len(p), nil }

type writerFunc func([]byte) (int, error)

// Write implements io.Writer.
func (w writerFunc) Write(p []byte) (int, error) { return w(p) }
