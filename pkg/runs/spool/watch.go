package spool

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"

	"github.com/fsnotify/fsnotify"

	"github.com/pcsync/pcsync/pkg/runs"
)

// spoolEvent says that files of a request name changed.
type spoolEvent struct {
	name string
	kind runs.FileKind
}

// spoolWatcher turns fsnotify events in the spool directory into spool
// events. Events can be lost (queue overflow, network file systems); the
// daemon's periodic rescan catches up, and an overflow asks for a rescan at
// once.
type spoolWatcher struct {
	w   *fsnotify.Watcher
	log *slog.Logger
}

func newSpoolWatcher(dir string, log *slog.Logger) (*spoolWatcher, error) {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("watch spool %s: %w", dir, err)
	}
	if err := w.Add(dir); err != nil {
		w.Close()
		return nil, fmt.Errorf("watch spool %s: %w", dir, err)
	}
	return &spoolWatcher{w: w, log: log}, nil
}

// run forwards events until ctx ends; it closes the watcher on return.
func (s *spoolWatcher) run(ctx context.Context, events chan<- spoolEvent, rescan chan<- struct{}) {
	defer s.w.Close()
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-s.w.Events:
			if !ok {
				return
			}
			kind, name := runs.Classify(filepath.Base(ev.Name))
			if kind == runs.KindIgnored || kind == runs.KindLog {
				continue
			}
			select {
			case events <- spoolEvent{name: name, kind: kind}:
			case <-ctx.Done():
				return
			}
		case err, ok := <-s.w.Errors:
			if !ok {
				return
			}
			if errors.Is(err, fsnotify.ErrEventOverflow) {
				s.log.Warn("spool watch overflowed; rescanning")
			} else {
				s.log.Warn("spool watch error; rescanning", slog.Any("error", err))
			}
			select {
			case rescan <- struct{}{}:
			default:
			}
		}
	}
}
