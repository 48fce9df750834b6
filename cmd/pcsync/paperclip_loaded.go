package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/pcsync/pcsync/internal/daemon"
	"github.com/pcsync/pcsync/internal/paperclipinstall"
	"github.com/pcsync/pcsync/pkg/health"
	"github.com/pcsync/pcsync/pkg/introspect"
)

// sandboxOptions sets the daemon's sandbox loop, and with
// --paperclip-install the tracking of what Paperclip loaded.
func (f *daemonFlags) sandboxOptions(ctx context.Context, g *globalOptions, opts *daemon.Options, self *introspect.Self) error {
	if f.sandbox.paperclipDir != "" {
		if opts.Health == nil {
			opts.Health = health.NewChecker()
		}
		hello, err := trackPaperclip(ctx, f.sandbox.paperclipDir, opts.Health, g.Logger)
		if err != nil {
			return err
		}
		f.sandbox.hello = hello
	}
	opts.Sandbox = f.sandbox.runner(g, f, self, opts.Metrics)
	return nil
}

// trackPaperclip starts keeping the /readyz condition PaperclipLoaded on
// h (not gating: a pod that is not Ready takes Paperclip's UI off its
// Service, and the UI is where a refusal is fixed), from the hellos of the packages in dir, until ctx
// ends, and returns what takes the hellos.
func trackPaperclip(ctx context.Context, dir string, h *health.Checker, log *slog.Logger) (func(component, name, version string) error, error) {
	t, err := paperclipinstall.NewTracker(dir)
	if err != nil {
		return nil, err
	}
	set := func(ok bool, reason, message string) { h.Set(paperclipinstall.CondLoaded, ok, false, reason, message) }
	go t.Run(ctx, 5*time.Second, set, log)
	return t.Hello, nil
}
