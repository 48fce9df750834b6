package daemon

import (
	"context"
	"log/slog"
	"strings"

	"github.com/pcsync/pcsync/internal/daemon/manager"
	"github.com/pcsync/pcsync/pkg/config"
	"github.com/pcsync/pcsync/pkg/imagecheck"
)

// ImagePreflight is the controller of the daemon's image preflight at
// start (WarnMissingImages), on every replica; it never fails the daemon.
func ImagePreflight(log *slog.Logger, dir string, lo config.LoadOptions, opts imagecheck.Options) manager.Controller {
	return manager.Controller{Name: "image-preflight", Run: func(ctx context.Context, started func()) error {
		started()
		WarnMissingImages(ctx, log, dir, lo, opts)
		<-ctx.Done()
		return nil
	}}
}

// WarnMissingImages looks every image the config in dir would run up in
// its registry (anonymously: the daemon reads no pull secret) and logs
// each one that is missing or unreachable as a warning naming who needs it
// and what fixes it, before the first run meets ErrImagePull. A refusal is
// logged at INFO: pull secrets may well give the kubelet what the daemon
// lacks. An invalid config logs nothing: the reconcile loop reports it.
func WarnMissingImages(ctx context.Context, log *slog.Logger, dir string, lo config.LoadOptions, opts imagecheck.Options) {
	m, err := config.Load(ctx, dir, lo)
	if err != nil {
		return
	}
	for _, f := range imagecheck.Preflight(ctx, m, opts) {
		if f.Result.OK() {
			continue
		}
		level := slog.LevelWarn
		if f.Result.Status == imagecheck.StatusDenied {
			level = slog.LevelInfo
		}
		log.Log(ctx, level, "image preflight: "+string(f.Result.Status),
			slog.String("image", f.Image), slog.String("for", strings.Join(f.Users, ", ")),
			slog.String("registry", f.Result.Detail), slog.String("fix", f.Advice))
	}
}
