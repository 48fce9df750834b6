// Package reconcile is the daemon's reconcile loop: it keeps the cluster in
// the shape of a config directory by loading, validating, rendering and
// applying it (pkg/config, pkg/render, pkg/apply) at start, whenever the
// directory changes, and every interval to correct drift.
// A change of the directory applies only the objects whose render changed
// since the last successful apply (apply.ApplyOptions.Partial, no prune);
// the start, every interval, a retry and a change that removes an object
// apply every object, with prune.
//
// The directory is watched with fsnotify (Watcher), including the way
// git-sync publishes a checkout: by renaming a new symbolic link over the
// old one. An invalid config is reported (log, pcsync_config_valid 0, a
// reconcile error, a degraded health condition) and changes nothing: no
// apply, no prune, and the last good config stays in force, also for the
// runs loop, which receives every valid config through Options.OnModel.
//
// Entry points: New, Loop.Run, Loop.Model, Loop.Ready; NewWatcher on its
// own.
package reconcile
