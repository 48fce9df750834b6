package reconcile

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// waitDeadline bounds waits; nothing asserts on timing.
const waitDeadline = 60 * time.Second

// quiet is how long a test waits to conclude that no change is reported.
// It only makes a missing report visible; a report that comes later would
// fail the next expectation.
const quiet = 500 * time.Millisecond

type watchHarness struct {
	t       *testing.T
	w       *Watcher
	changed chan struct{}
}

func startWatcher(t *testing.T, dir string) *watchHarness {
	t.Helper()
	w, err := NewWatcher(dir, WatchOptions{Debounce: 50 * time.Millisecond, MaxDelay: time.Second,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	h := &watchHarness{t: t, w: w, changed: make(chan struct{}, 1)}
	done := make(chan struct{})
	go func() { defer close(done); w.Run(ctx, h.changed) }()
	t.Cleanup(func() { cancel(); <-done })
	return h
}

// expectChange waits for a report after do.
func (h *watchHarness) expectChange(what string, do func()) {
	h.t.Helper()
	h.drain()
	do()
	select {
	case <-h.changed:
	case <-time.After(waitDeadline):
		h.t.Fatalf("%s: no change reported", what)
	}
}

// waitTarget waits, through further reports, until the watcher has resolved
// the config directory to want.
func (h *watchHarness) waitTarget(want string) {
	h.t.Helper()
	deadline := time.After(waitDeadline)
	for h.w.Target() != want {
		select {
		case <-h.changed:
		case <-time.After(50 * time.Millisecond):
		case <-deadline:
			h.t.Fatalf("resolved to %q, want %q", h.w.Target(), want)
		}
	}
}

// expectNoChange checks that do is not reported.
func (h *watchHarness) expectNoChange(what string, do func()) {
	h.t.Helper()
	h.drain()
	do()
	select {
	case <-h.changed:
		h.t.Errorf("%s: reported as a config change", what)
	case <-time.After(quiet):
	}
}

// drain waits until earlier operations have stopped reporting (a slow
// machine may split one operation's events into two reports).
func (h *watchHarness) drain() {
	for {
		select {
		case <-h.changed:
		case <-time.After(300 * time.Millisecond):
			return
		}
	}
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestWatcherPlainDirectory(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "a.yaml"), "a")
	h := startWatcher(t, dir)

	h.expectChange("edit", func() { write(t, filepath.Join(dir, "a.yaml"), "b") })
	h.expectChange("new subdirectory with a file", func() { write(t, filepath.Join(dir, "sub", "deep", "c.yaml"), "c") })
	h.expectChange("edit in the new subdirectory", func() { write(t, filepath.Join(dir, "sub", "deep", "c.yaml"), "d") })
	h.expectChange("remove", func() {
		if err := os.Remove(filepath.Join(dir, "a.yaml")); err != nil {
			t.Fatal(err)
		}
	})
	h.expectNoChange("hidden file", func() { write(t, filepath.Join(dir, ".a.yaml.swp"), "x") })
	h.expectNoChange("file in a hidden directory", func() { write(t, filepath.Join(dir, ".git", "HEAD"), "x") })
	h.expectNoChange("chmod", func() {
		if err := os.Chmod(filepath.Join(dir, "sub", "deep", "c.yaml"), 0o600); err != nil {
			t.Fatal(err)
		}
	})
}

// gitSync publishes a new checkout the way git-sync does: a new worktree
// directory, a temporary link to it, renamed over the published link.
func gitSync(t *testing.T, root, link, rev, content string) {
	t.Helper()
	wt := filepath.Join(root, ".worktrees", rev)
	write(t, filepath.Join(wt, "config", "fleet.yaml"), content)
	tmp := filepath.Join(root, "tmp-link")
	if err := os.Symlink(filepath.Join(".worktrees", rev), tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(root, link)); err != nil {
		t.Fatal(err)
	}
}

func TestWatcherGitSyncSymlinkSwap(t *testing.T) {
	root := t.TempDir()
	gitSync(t, root, "repo", "aaa", "one")
	// --config points into the published link: /git/repo/config.
	dir := filepath.Join(root, "repo", "config")
	h := startWatcher(t, dir)
	if got, want := h.w.Target(), filepath.Join(root, ".worktrees", "aaa", "config"); got != want {
		t.Fatalf("resolved to %s, want %s", got, want)
	}

	h.expectChange("swap", func() { gitSync(t, root, "repo", "bbb", "two") })
	if got, want := h.w.Target(), filepath.Join(root, ".worktrees", "bbb", "config"); got != want {
		t.Fatalf("after the swap resolved to %s, want %s", got, want)
	}
	h.expectNoChange("write in the old worktree", func() {
		write(t, filepath.Join(root, ".worktrees", "aaa", "config", "fleet.yaml"), "stale")
	})
	h.expectChange("edit in the new worktree", func() {
		write(t, filepath.Join(root, ".worktrees", "bbb", "config", "fleet.yaml"), "three")
	})
	h.expectNoChange("git-sync cleaning up the old worktree", func() {
		if err := os.RemoveAll(filepath.Join(root, ".worktrees", "aaa")); err != nil {
			t.Fatal(err)
		}
	})
	h.expectChange("second swap", func() { gitSync(t, root, "repo", "ccc", "four") })
}

func TestWatcherWaitsForMissingDirectory(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "git", "config")
	h := startWatcher(t, dir)
	if h.w.Target() != "" {
		t.Fatalf("target %q for a missing directory", h.w.Target())
	}
	h.expectChange("first clone appears", func() { gitSync(t, filepath.Join(root, "git"), "config", "aaa", "one") })
	// A slow machine may report the new "git" directory before the link
	// exists; each later event is reported again, and the target follows.
	h.waitTarget(filepath.Join(root, "git", ".worktrees", "aaa"))
	h.expectChange("edit", func() { write(t, filepath.Join(root, "git", ".worktrees", "aaa", "config", "fleet.yaml"), "two") })
}
