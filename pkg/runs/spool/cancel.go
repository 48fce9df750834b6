package spool

import (
	"log/slog"
	"path/filepath"
	"time"

	"github.com/pcsync/pcsync/pkg/result"
)

// checkCancel acts on <name>.cancel for a queued, starting or running run.
func (l *loop) checkCancel(e *entry) {
	if e.cancelled || e.run == nil || !l.cancelRequested(e.name) {
		return
	}
	e.cancelled = true
	log := l.srv.log.With(e.run.LogAttrs()...)
	l.observe(e, EventCancelling, "")
	switch e.state {
	case stateQueued:
		l.q.remove(e.run)
		l.cancelQueued(e, "cancelled while queued")
	case stateStarting:
		log.Info("cancel requested; stopping the run once it has started")
	case stateRunning:
		log.Info("cancel requested; stopping the run")
		e.handle.Cancel()
	}
}

// cancelQueued writes the cancelled result of a run that never started.
func (l *loop) cancelQueued(e *entry, why string) {
	res := e.run.NewResult()
	res.Fail(result.StatusCancelled, result.ErrCancelled, why+" ("+filepath.Base(l.srv.paths(e.name).Cancel())+")")
	now := time.Now().UTC()
	res.FinishedAt = &now
	l.srv.log.Info("run cancelled", append(e.run.LogAttrs(), slog.String("reason", why))...)
	_ = l.srv.writeResult(e.name, res)
	l.done(e, result.StatusCancelled)
}
