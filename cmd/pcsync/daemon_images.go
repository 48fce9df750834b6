package main

import (
	"context"
	"log/slog"
	"strings"

	"github.com/pcsync/pcsync/pkg/config"
	"github.com/pcsync/pcsync/pkg/imagecheck"
)

// warnImages is the daemon's image preflight at start: every image the
// config's pods would run is looked up in its registry (anonymously: the
// daemon reads no pull secret), and each one that is missing or unreachable
// is logged as a warning naming who needs it and what fixes it, before the
// first run meets ErrImagePull. It never stops the daemon.
func warnImages(ctx context.Context, g *globalOptions, dir string, lo config.LoadOptions) {
	m, err := config.Load(ctx, dir, lo)
	if err != nil {
		return // the reconcile loop reports an invalid config
	}
	for _, f := range imagecheck.Preflight(ctx, m, imagecheck.DefaultOptions()) {
		if f.Result.OK() {
			continue
		}
		level := slog.LevelWarn
		if f.Result.Status == imagecheck.StatusDenied {
			// Pull secrets may well give the kubelet what the daemon lacks.
			level = slog.LevelInfo
		}
		g.Logger.Log(ctx, level, "image preflight: "+string(f.Result.Status),
			slog.String("image", f.Image), slog.String("for", strings.Join(f.Users, ", ")),
			slog.String("registry", f.Result.Detail), slog.String("fix", f.Advice))
	}
}
