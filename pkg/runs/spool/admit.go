package spool

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/pcsync/pcsync/internal/lib/safefile"
	"github.com/pcsync/pcsync/pkg/result"
	"github.com/pcsync/pcsync/pkg/runs"
)

// admitKind is what reading a request name came to.
type admitKind string

const (
	// admitDone: the name already has a result.
	admitDone admitKind = "done"
	// admitGone: there is no request file (any more).
	admitGone admitKind = "gone"
	// admitRetry: the request does not validate yet; look again at retryAt.
	admitRetry admitKind = "retry"
	// admitRejected: a rejected result was written.
	admitRejected admitKind = "rejected"
	// admitAccepted: a valid run, never started (handle nil) or adopted.
	admitAccepted admitKind = "accepted"
	// admitError: something went wrong that is not the request's fault;
	// look again at the next rescan.
	admitError admitKind = "error"
	// admitIgnored: a file of the name is not one pcsync can use (a
	// result that is a FIFO or a link); the request is skipped while that
	// file is there.
	admitIgnored admitKind = "ignored"
)

// admission is a worker's answer about a request name.
type admission struct {
	name    string
	kind    admitKind
	runID   string
	status  result.Status
	run     *runs.Run
	handle  runs.Handle
	retryAt time.Time
	err     error
	// file is the file that makes an ignored request ignored.
	file string
}

// admitWorker reads request names handed out by the loop.
func (l *loop) admitWorker(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case name := <-l.admitCh:
			a := l.srv.safeAdmit(ctx, name)
			select {
			case l.admitted <- a:
			case <-ctx.Done():
				return
			}
		}
	}
}

// safeAdmit is admit that survives a panic on some input: the request is
// rejected with the panic's message instead of crashing the daemon (which
// would crash again on the same file after a restart).
func (s *Server) safeAdmit(ctx context.Context, name string) (a admission) {
	defer func() {
		if p := recover(); p != nil {
			s.log.Error("reading a request panicked; rejecting it", slog.String("name", name), slog.Any("panic", p))
			a = s.reject(name, &runs.Rejection{RunID: name, Message: fmt.Sprintf(
				"%s: pcsync failed to read this request (internal error: %v); please report it", name, p)})
		}
	}()
	return s.admit(ctx, name)
}

// admit reads, validates and (for a valid request) adopts one request name.
// It runs on a worker goroutine and touches no loop state.
func (s *Server) admit(ctx context.Context, name string) admission {
	paths := s.paths(name)
	if r, err := result.Read(paths.Result()); err == nil {
		return admission{name: name, kind: admitDone, runID: r.RunID, status: r.Status}
	} else if p := resultProblem(paths, err); p != "" {
		return admission{name: name, kind: admitIgnored, file: paths.Result(), err: errors.New(p)}
	} else if _, serr := os.Lstat(paths.Result()); serr == nil {
		// A result that does not decode is still a result: done.
		return admission{name: name, kind: admitDone}
	}
	var files []string
	for _, p := range paths.Requests() {
		if _, err := os.Lstat(p); err == nil {
			files = append(files, p)
		}
	}
	switch len(files) {
	case 0:
		return admission{name: name, kind: admitGone}
	case 1:
	default:
		var bases []string
		for _, f := range files {
			bases = append(bases, filepath.Base(f))
		}
		rej := &runs.Rejection{RunID: name, Message: fmt.Sprintf(
			"%s: several requests are named %q (%s) and share one result file; keep one of them",
			bases[0], name, strings.Join(bases, ", "))}
		return s.reject(name, rej)
	}
	file := files[0]
	run, err := runs.LoadRequest(s.model.Load(), file, s.opts.MaxRequestBytes)
	var rej *runs.Rejection
	switch {
	case errors.As(err, &rej):
		fi, serr := os.Lstat(file)
		if serr != nil {
			return admission{name: name, kind: admitGone}
		}
		now := time.Now()
		mt := fi.ModTime()
		if now.Sub(mt) < s.opts.SettleWindow {
			// The writer may still be at it (it does not rename files in).
			base := mt
			if mt.After(now) {
				base = now
			}
			return admission{name: name, kind: admitRetry, retryAt: base.Add(s.opts.SettleWindow + 10*time.Millisecond), err: rej}
		}
		return s.reject(name, rej)
	case errors.Is(err, os.ErrNotExist):
		return admission{name: name, kind: admitGone}
	case err != nil:
		return admission{name: name, kind: admitError, err: err}
	}
	if run.PreviousUsage, err = s.usage.previous(string(run.Agent.Adapter), run.Request.SessionID); err != nil {
		s.log.Warn("cannot read the session's usage total", append(run.LogAttrs(), slog.Any("error", err))...)
	}
	h, err := s.exec.Adopt(ctx, run)
	switch {
	case errors.Is(err, runs.ErrNotStarted):
		if !s.opts.Shard.Serves(run.Company) {
			return s.reject(name, &runs.Rejection{RunID: run.RunID, Company: run.Company.Slug(), Agent: run.Agent.Name,
				Adapter: string(run.Agent.Adapter), Message: name + ": " + s.opts.Shard.Refusal(run.Company)})
		}
		if run.Company.Suspended() {
			return s.reject(name, &runs.Rejection{RunID: run.RunID, Company: run.Company.Slug(), Agent: run.Agent.Name,
				Adapter: string(run.Agent.Adapter), Code: result.ErrCompanySuspended, Message: fmt.Sprintf(
					"%s: company %q is suspended (spec.suspend in its config): no new run starts until it is resumed", name, run.Company.Slug())})
		}
		if rej := checkOutputs(run); rej != nil {
			return s.reject(name, rej)
		}
		return admission{name: name, kind: admitAccepted, run: run}
	case err != nil:
		return admission{name: name, kind: admitError, run: run, err: fmt.Errorf("adopt: %w", err)}
	}
	return admission{name: name, kind: admitAccepted, run: run, handle: h}
}

// resultProblem says why a result file that did not read is not one pcsync
// can use (a symbolic link, a FIFO, a device, a file too large), or "" when
// the error is something else.
func resultProblem(paths runs.Paths, err error) string {
	base := filepath.Base(paths.Result())
	var unsafe *safefile.UnsafeError
	switch {
	case errors.As(err, &unsafe):
		return fmt.Sprintf("%s: %s; pcsync never reads it and does not run the request while it is there (remove it to run the request)", base, unsafe.Reason())
	case errors.Is(err, safefile.ErrTooLarge):
		return fmt.Sprintf("%s: larger than %d bytes, not a result pcsync wrote; pcsync does not run the request while it is there (remove it to run the request)", base, result.MaxBytes)
	}
	return ""
}

// checkOutputs rejects a run that is about to be queued when a file pcsync
// will write for it is already there and is not a regular file of its own:
// a <name>.log that is a symbolic or hard link to a file elsewhere (pcsync
// would append to or truncate that file), a FIFO (the run would hang on
// it), a directory.
func checkOutputs(r *runs.Run) *runs.Rejection {
	_, err := safefile.Check(r.Paths.Log())
	var unsafe *safefile.UnsafeError
	if !errors.As(err, &unsafe) {
		return nil
	}
	return &runs.Rejection{RunID: r.RunID, Company: r.Company.Slug(), Agent: r.Agent.Name, Adapter: string(r.Agent.Adapter),
		Message: fmt.Sprintf("%s: %s; pcsync writes the run's log there and never through a link or into a FIFO: remove it and the result to run the request",
			filepath.Base(r.Paths.Log()), unsafe.Reason())}
}

// reject writes the rejected result of a request.
func (s *Server) reject(name string, rej *runs.Rejection) admission {
	res := result.New(rej.RunID, rej.Company, rej.Agent, rej.Adapter)
	res.Fail(result.StatusRejected, cmp.Or(rej.Code, result.ErrInvalidRequest), rej.Message)
	now := time.Now().UTC()
	res.FinishedAt = &now
	s.log.Warn("request rejected", slog.String("name", name), slog.String("runId", rej.RunID), slog.String("reason", rej.Message))
	if err := s.writeResult(name, res); err != nil {
		return admission{name: name, kind: admitError, err: err}
	}
	return admission{name: name, kind: admitRejected, runID: rej.RunID, status: result.StatusRejected}
}

// writeResult writes a result file, exactly once.
func (s *Server) writeResult(name string, res result.RunResult) error {
	err := result.Write(s.paths(name).Result(), res)
	if errors.Is(err, result.ErrExists) {
		s.log.Warn("result already written; keeping the first", slog.String("name", name), slog.String("runId", res.RunID))
		return nil
	}
	if err != nil {
		s.log.Error("cannot write result", slog.String("name", name), slog.String("runId", res.RunID), slog.Any("error", err))
		return err
	}
	if m := s.opts.Metrics; m != nil {
		m.ObserveRun(res)
	}
	return nil
}

// takeAdmissions takes a worker's answer and the answers already waiting
// behind it (at most batchMax in all) into the loop, then starts what may
// start.
func (l *loop) takeAdmissions(ctx context.Context, wg *sync.WaitGroup, a admission) {
	for n := 1; ; n++ {
		l.inflight--
		l.onAdmitted(ctx, wg, a)
		if n == batchMax {
			break
		}
		select {
		case a = <-l.admitted:
			continue
		default:
		}
		break
	}
	l.schedule(ctx, wg)
}

// onAdmitted takes a worker's answer into the loop; the caller schedules.
func (l *loop) onAdmitted(ctx context.Context, wg *sync.WaitGroup, a admission) {
	delete(l.initial, a.name)
	e := l.entries[a.name]
	if e == nil {
		return
	}
	e.admitting = false
	switch a.kind {
	case admitDone:
		if a.status != result.StatusRejected && a.runID != "" {
			l.claimRunID(e, a.runID)
		}
		e.state = stateDone
		delete(l.once, e.name)
	case admitGone:
		l.vanished(e)
		return
	case admitRetry:
		l.srv.log.Debug("request does not validate yet and changed recently; retrying",
			slog.String("name", a.name), slog.Time("retryAt", a.retryAt))
		l.observe(e, EventRetrying, "")
		name := a.name
		e.retry = time.AfterFunc(time.Until(a.retryAt), func() {
			select {
			case l.retryCh <- name:
			case <-ctx.Done():
			}
		})
	case admitRejected:
		e.runID = a.runID
		l.observe(e, EventRejected, result.StatusRejected)
		l.done(e, result.StatusRejected)
	case admitError:
		l.srv.log.Error("cannot read request; retrying at the next rescan", slog.String("name", a.name), slog.Any("error", a.err))
	case admitIgnored:
		l.ignore(e, a.file, a.err.Error())
	case admitAccepted:
		l.accept(ctx, wg, e, a)
	}
	if e.again && e.state == statePending && e.retry == nil {
		e.again = false
		l.consider(e.name)
	}
	e.again = false
}

// accept queues a valid run, or takes an adopted one in as running.
func (l *loop) accept(ctx context.Context, wg *sync.WaitGroup, e *entry, a admission) {
	r := a.run
	e.run = r
	log := l.srv.log.With(r.LogAttrs()...)
	if a.handle == nil {
		if other, ok := l.runIDs[r.RunID]; ok && other != e.name {
			rej := &runs.Rejection{RunID: r.RunID, Company: r.Company.Slug(), Agent: r.Agent.Name, Adapter: string(r.Agent.Adapter),
				Message: fmt.Sprintf("%s: runId: %q is already the run id of request %q; run ids are unique in a spool", filepath.Base(r.RequestFile), r.RunID, other)}
			if b := l.srv.reject(e.name, rej); b.kind == admitRejected {
				l.observe(e, EventRejected, result.StatusRejected)
				l.done(e, result.StatusRejected)
			}
			return
		}
	}
	l.claimRunID(e, r.RunID)
	if a.handle != nil {
		e.state = stateRunning
		e.handle = a.handle
		l.q.occupy(r)
		log.Info("run adopted from an earlier daemon")
		l.observe(e, EventAdopted, "")
		l.wait(ctx, wg, e, a.handle)
		l.checkCancel(e)
		return
	}
	if l.cancelRequested(e.name) {
		e.cancelled = true
		l.cancelQueued(e, "cancelled before it started")
		return
	}
	e.state = stateQueued
	l.q.push(r)
	log.Info("run queued")
	l.observe(e, EventQueued, "")
}

// schedule starts every run that has a free slot.
func (l *loop) schedule(ctx context.Context, wg *sync.WaitGroup) {
	if len(l.initial) > 0 {
		return
	}
	for _, r := range l.q.ready() {
		e := l.entries[r.Name()]
		e.state = stateStarting
		l.observe(e, EventStarting, "")
		wg.Add(1)
		go func() {
			defer wg.Done()
			var err error
			if r.PreviousUsage, err = l.srv.usage.previous(string(r.Agent.Adapter), r.Request.SessionID); err != nil {
				l.srv.log.Warn("cannot read the session's usage total", append(r.LogAttrs(), slog.Any("error", err))...)
			}
			h, err := l.srv.exec.Start(ctx, r)
			select {
			case l.startedCh <- started{name: r.Name(), handle: h, err: err}:
			case <-ctx.Done():
			}
		}()
	}
}

// onStarted records a started run, or writes the failure of one that did
// not start.
func (l *loop) onStarted(ctx context.Context, wg *sync.WaitGroup, s started) {
	e := l.entries[s.name]
	if e == nil || e.state != stateStarting {
		return
	}
	log := l.srv.log.With(e.run.LogAttrs()...)
	if s.err != nil {
		res := e.run.NewResult()
		code := result.ErrInternal
		var se *runs.StartError
		if errors.As(s.err, &se) {
			code = se.Code
		}
		res.Fail(result.StatusFailed, code, s.err.Error())
		now := time.Now().UTC()
		res.FinishedAt = &now
		log.Error("run could not start", slog.Any("error", s.err))
		_ = l.srv.writeResult(e.name, res)
		l.q.release(e.run)
		l.done(e, res.Status)
		return
	}
	e.state = stateRunning
	e.handle = s.handle
	now := time.Now().UTC()
	e.startedAt = &now
	log.Info("run started")
	l.observe(e, EventStarted, "")
	l.wait(ctx, wg, e, s.handle)
	if e.cancelled {
		s.handle.Cancel()
	}
}

// onFinished frees the slot of a run whose result is written.
func (l *loop) onFinished(ctx context.Context, wg *sync.WaitGroup, f finished) {
	e := l.entries[f.name]
	if e == nil {
		return
	}
	if f.slot {
		l.q.release(e.run)
	}
	l.done(e, f.status)
	l.schedule(ctx, wg)
}
