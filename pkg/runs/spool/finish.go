package spool

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/pcsync/pcsync/pkg/result"
	"github.com/pcsync/pcsync/pkg/runs"
)

// wait follows a started or adopted run to its end, writes its result and
// frees its slot.
func (l *loop) wait(ctx context.Context, wg *sync.WaitGroup, e *entry, h runs.Handle) {
	r := e.run
	wg.Add(1)
	go func() {
		defer wg.Done()
		end, err := h.Wait(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return // shutting down: the run goes on and the next daemon adopts it
			}
			end = runs.Ending{Result: r.NewResult()}
			end.Result.Fail(result.StatusFailed, result.ErrInternal, fmt.Sprintf("following the run failed: %v", err))
			now := time.Now().UTC()
			end.Result.FinishedAt = &now
		}
		l.srv.finish(ctx, r, h, end)
		select {
		case l.finishCh <- finished{name: r.Name(), status: end.Result.Status, slot: true}:
		case <-ctx.Done():
		}
	}()
}

// finish keeps the session's usage total, writes the run's result and lets
// the executor forget the run.
func (s *Server) finish(ctx context.Context, r *runs.Run, h runs.Handle, end runs.Ending) {
	res := end.Result
	log := s.log.With(r.LogAttrs()...)
	if end.SessionTotal != nil && res.SessionID != nil {
		if err := s.usage.record(res.Adapter, *res.SessionID, res.RunID, *end.SessionTotal); err != nil {
			log.Warn("cannot keep the session's usage total", slog.Any("error", err))
		}
	}
	if err := s.writeResult(r.Name(), res); err != nil {
		return // the executor keeps its state; the next daemon tries again
	}
	attrs := []any{slog.String("status", string(res.Status))}
	if res.ErrorCode != nil {
		attrs = append(attrs, slog.String("errorCode", string(*res.ErrorCode)))
	}
	if res.DurationMs != nil {
		attrs = append(attrs, slog.Int64("durationMs", *res.DurationMs))
	}
	log.Info("run finished", attrs...)
	if err := h.Release(ctx); err != nil {
		log.Warn("cannot clean up after the run", slog.Any("error", err))
	}
}
