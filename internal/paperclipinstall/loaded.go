package paperclipinstall

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// CondLoaded is the /readyz condition (not gating: degraded while false) a
// daemon with a Tracker
// keeps: whether the Paperclip server beside it has loaded the adapter and
// the plugin that Install put in place, at their versions.
const CondLoaded = "PaperclipLoaded"

// Components that say hello.
const (
	ComponentAdapter = "adapter"
	ComponentPlugin  = "plugin"
)

// WarnAfter is how long Run waits for Paperclip before it logs a warning
// with the likely causes.
const WarnAfter = 10 * time.Minute

// Tracker compares what Install put in place with what Paperclip loaded,
// as each package reports it on load (Hello). It is safe for concurrent use.
type Tracker struct {
	dir  string
	want map[string]Package
	now  func() time.Time

	mu    sync.Mutex
	seen  map[string]Package
	since time.Time
}

// NewTracker reads the packages Install put into dir.
func NewTracker(dir string) (*Tracker, error) {
	t := &Tracker{dir: dir, want: map[string]Package{}, seen: map[string]Package{}, now: time.Now}
	for c, sub := range map[string]string{ComponentAdapter: AdapterDir, ComponentPlugin: PluginDir} {
		p, err := ReadPackage(filepath.Join(dir, sub))
		if err != nil {
			return nil, fmt.Errorf("%w (is `pcsync paperclip install --into %s` the init container of this pod?)", err, dir)
		}
		t.want[c] = p
	}
	t.since = t.now()
	return t, nil
}

// Hello records that Paperclip loaded component at name and version.
func (t *Tracker) Hello(component, name, version string) error {
	if _, ok := t.want[component]; !ok {
		return fmt.Errorf("unknown component %q (want %s or %s)", component, ComponentAdapter, ComponentPlugin)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.seen[component] = Package{Name: name, Version: version}
	return nil
}

// Condition is CondLoaded now: ok once both components said hello at the
// versions in place; otherwise which one Paperclip has not loaded, or
// loaded at another version, and for how long.
func (t *Tracker) Condition() (ok bool, reason, message string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var missing, stale []string
	for _, c := range []string{ComponentAdapter, ComponentPlugin} {
		want, got := t.want[c], t.seen[c]
		switch {
		case got.Version == "":
			missing = append(missing, fmt.Sprintf("%s %s %s", c, want.Name, want.Version))
		case got != want:
			stale = append(stale, fmt.Sprintf("%s %s %s (in place: %s %s)", c, got.Name, got.Version, want.Name, want.Version))
		}
	}
	switch {
	case len(stale) > 0:
		return false, "VersionMismatch", "Paperclip runs pcsync's " + strings.Join(stale, " and ") +
			": restart the Paperclip container to load what is in " + t.dir
	case len(missing) > 0:
		return false, "Waiting", fmt.Sprintf("Paperclip has not loaded pcsync's %s from %s (waiting %s); "+
			"if it refused, its log names the package", strings.Join(missing, " and "), t.dir, t.now().Sub(t.since).Round(time.Second))
	}
	a, p := t.want[ComponentAdapter], t.want[ComponentPlugin]
	return true, "Loaded", fmt.Sprintf("Paperclip loaded pcsync's adapter %s %s and plugin %s %s", a.Name, a.Version, p.Name, p.Version)
}

// Run keeps CondLoaded up to date through set every interval until ctx
// ends, and logs each change of reason.
func (t *Tracker) Run(ctx context.Context, interval time.Duration, set func(ok bool, reason, message string), log *slog.Logger) {
	last, warned := "", false
	for {
		ok, reason, msg := t.Condition()
		set(ok, reason, msg)
		if reason == "Waiting" && !warned && t.now().Sub(t.since) > WarnAfter {
			log.Warn(msg+". Paperclip installs pcsync's plugin at start only while it has no Kubernetes sandbox plugin "+
				"(paperclip.kubernetes-sandbox-provider): uninstall that one on Paperclip's Plugins page and restart it",
				"condition", CondLoaded, "reason", reason)
			warned = true
		}
		if reason != last {
			level := slog.LevelInfo
			if reason == "VersionMismatch" {
				level = slog.LevelError
			}
			log.Log(ctx, level, msg, "condition", CondLoaded, "reason", reason)
			last = reason
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(interval):
		}
	}
}
