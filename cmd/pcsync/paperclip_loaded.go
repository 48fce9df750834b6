package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/pcsync/pcsync/internal/daemon"
	"github.com/pcsync/pcsync/internal/daemon/manager"
	"github.com/pcsync/pcsync/internal/paperclipinstall"
	"github.com/pcsync/pcsync/pkg/health"
	"github.com/pcsync/pcsync/pkg/introspect"
)

// sandboxOptions sets the daemon's sandbox loop, and with
// --paperclip-install the tracking of what Paperclip loaded.
func (f *daemonFlags) sandboxOptions(g *globalOptions, opts *daemon.Options, self *introspect.Self) error {
	if f.sandbox.paperclipDir != "" {
		if opts.Health == nil {
			opts.Health = health.NewChecker()
		}
		tracker, err := trackPaperclip(f.sandbox.paperclipDir, opts.Health, g.Logger)
		if err != nil {
			return err
		}
		f.sandbox.hello = tracker.hello
		opts.Controllers = append(opts.Controllers, tracker.controller)
	}
	opts.Sandbox = f.sandbox.runner(g, f, self, opts.Metrics)
	return nil
}

// paperclipTracker keeps the /readyz condition PaperclipLoaded.
type paperclipTracker struct {
	// hello takes the hellos of the packages installed.
	hello func(component, name, version string) error
	// controller keeps the condition, on every replica, until the daemon
	// stops.
	controller manager.Controller
}

// trackPaperclip keeps the /readyz condition PaperclipLoaded on h (not
// gating: a pod that is not Ready takes Paperclip's UI off its Service, and
// the UI is where a refusal is fixed), from the hellos of the packages in
// dir, while its controller runs.
func trackPaperclip(dir string, h *health.Checker, log *slog.Logger) (paperclipTracker, error) {
	t, err := paperclipinstall.NewTracker(dir)
	if err != nil {
		return paperclipTracker{}, err
	}
	set := func(ok bool, reason, message string) { h.Set(paperclipinstall.CondLoaded, ok, false, reason, message) }
	return paperclipTracker{hello: t.Hello, controller: manager.Controller{Name: "paperclip-loaded", Run: func(ctx context.Context, started func()) error {
		started()
		t.Run(ctx, 5*time.Second, set, log)
		return nil
	}}}, nil
}
