package reconcile

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"
)

// WatchOptions configure a Watcher.
type WatchOptions struct {
	// Debounce is the quiet time after the last relevant event before a
	// change is reported. Default 1s.
	Debounce time.Duration
	// MaxDelay bounds how long a stream of events may postpone the report.
	// Default 10s.
	MaxDelay time.Duration
	// Logger receives the watcher's logs. Default slog.Default().
	Logger *slog.Logger
}

// DefaultWatchOptions returns the defaults described on WatchOptions.
func DefaultWatchOptions() WatchOptions {
	return WatchOptions{Debounce: time.Second, MaxDelay: 10 * time.Second, Logger: slog.Default()}
}

// complete fills the zero fields with DefaultWatchOptions' (a negative
// Debounce too); a MaxDelay shorter than Debounce becomes the default, or
// Debounce when that is longer.
func (o *WatchOptions) complete() {
	d := DefaultWatchOptions()
	o.Debounce = cmp.Or(max(o.Debounce, 0), d.Debounce)
	if o.MaxDelay < o.Debounce {
		o.MaxDelay = max(d.MaxDelay, o.Debounce)
	}
	o.Logger = cmp.Or(o.Logger, d.Logger)
}

// Watcher reports changes of a config directory. fsnotify watches are not
// recursive and do not follow symbolic links, so the Watcher keeps one
// watch per directory of the tree (hidden directories skipped, as the config
// loader skips them) and, for every symbolic link on the way to the
// directory, a watch on the link's parent: git-sync publishes a new checkout
// by renaming a new link over the old one, an event in that parent, after
// which the Watcher resolves the path again and moves its watches to the new
// tree. A path that does not exist yet (git-sync has not cloned) is awaited
// the same way, from its deepest existing ancestor.
//
// Events are coalesced: a change is reported once the tree has been quiet
// for Debounce (at most MaxDelay after the first event). Events can be lost
// (queue overflow, some network file systems); an overflow is reported as a
// change, and the loop's periodic reconcile catches the rest.
type Watcher struct {
	dir  string
	opts WatchOptions
	log  *slog.Logger
	w    *fsnotify.Watcher
	// tree are the watched directories of the resolved config tree.
	tree map[string]bool
	// anchors are the paths (symbolic links, or missing components) whose
	// events make the Watcher resolve the path again; anchorDirs are their
	// watched parents.
	anchors    map[string]bool
	anchorDirs map[string]bool
	// target is the resolved config directory, "" while it does not exist.
	target string
	// mu guards target for Target.
	mu sync.Mutex
}

// NewWatcher starts watching dir (an absolute path).
func NewWatcher(dir string, opts WatchOptions) (*Watcher, error) {
	opts.complete()
	fw, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("watch config %s: %w", dir, err)
	}
	w := &Watcher{dir: filepath.Clean(dir), opts: opts, log: opts.Logger, w: fw,
		tree: map[string]bool{}, anchors: map[string]bool{}, anchorDirs: map[string]bool{}}
	if err := w.resync(); err != nil {
		fw.Close()
		return nil, err
	}
	return w, nil
}

// Target returns the directory the config path currently resolves to, or ""
// when it does not exist.
func (w *Watcher) Target() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.target
}

// Run reports changes on changed (without blocking: a pending report is
// enough) until ctx ends, then closes the watcher.
func (w *Watcher) Run(ctx context.Context, changed chan<- struct{}) {
	defer w.w.Close()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	var first time.Time // of the events not yet reported; zero when none
	notify := func() {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	pending := func() {
		now := time.Now()
		if first.IsZero() {
			first = now
		}
		wait := w.opts.Debounce
		if rest := w.opts.MaxDelay - now.Sub(first); rest < wait {
			wait = max(rest, 0)
		}
		timer.Reset(wait)
	}
	for {
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-timer.C:
			first = time.Time{}
			notify()
		case ev, ok := <-w.w.Events:
			if !ok {
				return
			}
			if w.relevant(ev) {
				w.log.Debug("config change seen", slog.String("path", ev.Name), slog.String("op", ev.Op.String()))
				pending()
			}
		case err, ok := <-w.w.Errors:
			if !ok {
				return
			}
			if errors.Is(err, fsnotify.ErrEventOverflow) {
				w.log.Warn("config watch overflowed; reconciling")
			} else {
				w.log.Warn("config watch error; reconciling", slog.Any("error", err))
			}
			if err := w.resync(); err != nil {
				w.log.Warn("cannot watch the config directory; relying on the periodic reconcile", slog.Any("error", err))
			}
			pending()
		}
	}
}

// relevant decides whether an event may change the config, and keeps the
// watches in step with the tree.
func (w *Watcher) relevant(ev fsnotify.Event) bool {
	name := filepath.Clean(ev.Name)
	if w.anchors[name] {
		// A link swapped (git-sync), or a missing component appeared.
		if err := w.resync(); err != nil {
			w.log.Warn("cannot watch the config directory; relying on the periodic reconcile", slog.Any("error", err))
		}
		return true
	}
	parent := filepath.Dir(name)
	if !w.tree[parent] && !w.tree[name] {
		// Another entry of a link's parent (git-sync's worktrees, its
		// temporary link): not the config.
		return false
	}
	if ev.Op == fsnotify.Chmod {
		return false
	}
	if hidden(filepath.Base(name)) && name != w.target {
		// The loader skips hidden files and directories (editors' swap
		// files, .git).
		return false
	}
	if ev.Has(fsnotify.Create) || ev.Has(fsnotify.Remove) || ev.Has(fsnotify.Rename) {
		// A directory may have come or gone: watch the tree as it is now.
		if err := w.resync(); err != nil {
			w.log.Warn("cannot watch the config directory; relying on the periodic reconcile", slog.Any("error", err))
		}
	}
	return true
}

// resync resolves the config path again and moves the watches to what it
// finds: the parents of its symbolic links (and of its first missing
// component) and every non-hidden directory of the tree it resolves to.
//
// An entry created in a directory before its watch was added makes no event,
// so after adding a watch the path is resolved once more, until a pass adds
// nothing: whatever changes after that is seen by a watch.
func (w *Watcher) resync() error {
	for range 16 {
		added, err := w.resyncOnce()
		if err != nil || !added {
			return err
		}
	}
	return nil
}

// resyncOnce is one pass of resync; it reports whether it added a watch.
func (w *Watcher) resyncOnce() (bool, error) {
	target, anchors, anchorDirs, err := w.resolve()
	if err != nil {
		return false, err
	}
	tree, err := w.walkTree(target)
	if err != nil {
		return false, err
	}
	want := map[string]bool{}
	for d := range tree {
		want[d] = true
	}
	for d := range anchorDirs {
		want[d] = true
	}
	added, err := w.watchOnly(want)
	if target != w.target {
		w.log.Info("watching the config directory", slog.String("path", w.dir), slog.String("resolved", target))
	}
	w.mu.Lock()
	w.tree, w.anchors, w.anchorDirs, w.target = tree, anchors, anchorDirs, target
	w.mu.Unlock()
	return added, err
}

// resolve follows the config directory's path component by component,
// links included. It returns the directory it resolves to ("" if none yet),
// and the paths whose change may change that (anchors: each link, and the
// first missing entry or a file where a directory should be) with their
// parent directories.
func (w *Watcher) resolve() (target string, anchors, anchorDirs map[string]bool, err error) {
	anchors, anchorDirs = map[string]bool{}, map[string]bool{}
	sep := string(filepath.Separator)
	cur := sep
	rest := strings.Split(strings.TrimPrefix(w.dir, cur), sep)
	hops := 0
	for len(rest) > 0 {
		if rest[0] == "" {
			rest = rest[1:]
			continue
		}
		next := filepath.Join(cur, rest[0])
		fi, err := os.Lstat(next)
		if err != nil {
			// Not there (yet): wait for it in its parent.
			anchors[next], anchorDirs[cur] = true, true
			break
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			anchors[next], anchorDirs[cur] = true, true
			if hops++; hops > 40 {
				return "", nil, nil, fmt.Errorf("watch config %s: too many levels of symbolic links", w.dir)
			}
			dest, err := os.Readlink(next)
			if err != nil {
				break
			}
			if !filepath.IsAbs(dest) {
				dest = filepath.Join(cur, dest)
			}
			// Resolve the link's target component by component too: it may
			// contain links itself.
			rest = append(strings.Split(strings.TrimPrefix(filepath.Clean(dest), sep), sep), rest[1:]...)
			cur = sep
			continue
		}
		cur, rest = next, rest[1:]
		if len(rest) == 0 {
			if fi.IsDir() {
				target = cur
			} else {
				// A file where the directory should be: watch its parent.
				anchors[cur], anchorDirs[filepath.Dir(cur)] = true, true
			}
		}
	}
	return target, anchors, anchorDirs, nil
}

// walkTree returns the directories under target (itself included), leaving
// hidden ones out; none when target is "".
func (w *Watcher) walkTree(target string) (map[string]bool, error) {
	tree := map[string]bool{}
	if target == "" {
		return tree, nil
	}
	err := filepath.WalkDir(target, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == target {
				return err
			}
			return nil // vanished meanwhile; the next event resyncs
		}
		if !d.IsDir() {
			return nil
		}
		if p != target && hidden(d.Name()) {
			return filepath.SkipDir
		}
		tree[p] = true
		return nil
	})
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("watch config %s: %w", w.dir, err)
	}
	return tree, nil
}

// watchOnly makes fsnotify watch the directories of want and no other; it
// reports whether it added a watch. A directory gone meanwhile is no error.
func (w *Watcher) watchOnly(want map[string]bool) (bool, error) {
	for d := range w.watching() {
		if !want[d] {
			_ = w.w.Remove(d)
		}
	}
	have := w.watching()
	added := false
	var errs []error
	for d := range want {
		if have[d] {
			continue
		}
		err := w.w.Add(d)
		switch {
		case err == nil:
			added = true
		case !errors.Is(err, fs.ErrNotExist):
			errs = append(errs, fmt.Errorf("watch %s: %w", d, err))
		}
	}
	return added, errors.Join(errs...)
}

// watching returns the directories fsnotify watches now.
func (w *Watcher) watching() map[string]bool {
	m := map[string]bool{}
	for _, d := range w.w.WatchList() {
		m[d] = true
	}
	return m
}

func hidden(name string) bool { return strings.HasPrefix(name, ".") }
