package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pcsync/pcsync/pkg/sandbox/cmdclient"
)

// SyncKind is what one mapping of a workspace sync moves: Paperclip's
// PluginSyncFileMapping kind.
type SyncKind string

// The kinds of a sync mapping.
const (
	// SyncFile is one regular file: its bytes as they are.
	SyncFile SyncKind = "file"
	// SyncDirectory is a directory tree: a tar of its entries (no "."
	// entry), which replaces the target as a whole.
	SyncDirectory SyncKind = "directory"
)

// MaxSyncBytes is the most one mapping of a sync may move. A mapping's
// bytes stream through the daemon, which holds none of them: one put holds
// a stdin frame (cmdclient), one get the frame being written.
const MaxSyncBytes = 1 << 30

// errSyncTooLarge fails a mapping that moves more than MaxSyncBytes.
var errSyncTooLarge = fmt.Errorf("more than a sync mapping may move (%d bytes)", MaxSyncBytes)

// defaultSyncTimeout bounds a sync command that Paperclip gives no timeout.
const defaultSyncTimeout = 5 * time.Minute

// PutParams place bytes at a path of the lease's pod (one mapping of
// Paperclip's syncIn).
type PutParams struct {
	LeaseID string
	// Target is an absolute POSIX path in the pod.
	Target string
	Kind   SyncKind
	// Data is the file's bytes (SyncFile) or a tar of the tree
	// (SyncDirectory), read to its EOF as it is sent: at most MaxSyncBytes.
	Data io.Reader
	// Mode, if not nil, is the target's permission bits (at most 07777).
	Mode *uint32
	// Timeout bounds the command that places the bytes; 0: 5 minutes.
	Timeout time.Duration
}

// GetParams read a path of the lease's pod (one mapping of Paperclip's
// syncOut).
type GetParams struct {
	LeaseID string
	// Source is an absolute POSIX path in the pod.
	Source string
	Kind   SyncKind
	// Exclude are tar --exclude globs of a SyncDirectory.
	Exclude []string
	// FollowSymlinks archives what a symlink of a SyncDirectory points to
	// (tar -h) instead of the link.
	FollowSymlinks bool
	// Timeout bounds the command that reads the bytes; 0: 5 minutes.
	Timeout time.Duration
}

// The pod-side commands of a sync. Each is one `sh -c` of the lease's
// command stream whose paths and globs are positional arguments, never
// text of the script. A file lands under a hidden temporary name with its
// mode and is renamed into place; a tree is extracted into a temporary
// sibling and replaces the target whole.
const (
	putFileScript = `set -e
t=$1 m=$2
mkdir -p -- "$(dirname -- "$t")"
tmp=$t.pcsync-sync.$$
trap 'rm -f -- "$tmp"' EXIT
if [ -n "$m" ]; then (umask 077; cat >"$tmp"); chmod "$m" "$tmp"; else cat >"$tmp"; fi
mv -f -- "$tmp" "$t"
trap - EXIT`
	putDirScript = `set -e
t=$1 m=$2
mkdir -p -- "$(dirname -- "$t")"
tmp=$t.pcsync-sync.$$
trap 'rm -rf -- "$tmp"' EXIT
mkdir -- "$tmp"
tar -xf - -C "$tmp"
[ -z "$m" ] || chmod "$m" "$tmp"
rm -rf -- "$t"
mv -- "$tmp" "$t"
trap - EXIT`
	getFileScript = `exec cat -- "$1"`
	// getDirScript archives the entries of $1 by name (so no "." entry
	// carries the pod directory's mode to the host) with --exclude for
	// "._*" and each further argument; an empty directory is an empty tar.
	getDirScript = `cd -- "$1" || exit 1
h=$2
shift 2
n=$#
for p in '._*' "$@"; do set -- "$@" "--exclude=$p"; done
shift "$n"
set -- "$@" --
k=0
for e in * .[!.]* ..?*; do
  [ -e "$e" ] || [ -L "$e" ] || continue
  set -- "$@" "$e"
  k=$((k+1))
done
[ "$k" -gt 0 ] || exec dd if=/dev/zero bs=1024 count=1 2>/dev/null
exec tar -c $h -f - "$@"`
)

// Put places p.Data at p.Target in the lease's pod in one command of its
// stream, and returns how many bytes of p.Data it read (it reads no more
// once it returned): a file with its mode,
// renamed into place; a tree extracted from its tar, replacing the target.
// The bytes travel as the command's stdin frames as they are read, never
// as text. A put that fails on its way (its reader, the stream, ctx)
// kills the command: the target stays as it was (its temporary sibling
// may remain).
func (m *Manager) Put(ctx context.Context, p PutParams) (int64, error) {
	if err := checkSyncPath("targetPath", p.Target, p.Kind); err != nil {
		return 0, err
	}
	mode := ""
	if p.Mode != nil {
		if *p.Mode > 0o7777 {
			return 0, &BadRequestError{Field: "mode", Err: fmt.Errorf("%#o is no permission mode", *p.Mode)}
		}
		mode = strconv.FormatUint(uint64(*p.Mode), 8)
	}
	script := putFileScript
	if p.Kind == SyncDirectory {
		script = putDirScript
	}
	cmd := syncCommand(p.Timeout, script, p.Target, mode)
	src := &putSource{r: p.Data}
	if src.r == nil {
		src.r = strings.NewReader("")
	}
	defer src.stop()
	cmd.Stdin = src
	err := m.syncRun(ctx, p.LeaseID, SyncIn, "put "+string(p.Kind)+" "+p.Target, cmd, &src.n)
	if errors.Is(err, errSyncTooLarge) {
		return 0, userErrorf(CodeSyncFailed, "%s: %v", p.Target, errSyncTooLarge)
	}
	return src.n.Load(), err
}

// Get writes p.Source of the lease's pod to w as it comes, in one command
// of its stream, and returns how many bytes it wrote: a file's bytes, or a
// tar of a tree's entries without what p.Exclude matches. On an error,
// what w got is not the whole source.
func (m *Manager) Get(ctx context.Context, p GetParams, w io.Writer) (int64, error) {
	if err := checkSyncPath("sourcePath", p.Source, p.Kind); err != nil {
		return 0, err
	}
	cmd := syncCommand(p.Timeout, getFileScript, p.Source)
	if p.Kind == SyncDirectory {
		h := ""
		if p.FollowSymlinks {
			h = "-h"
		}
		cmd = syncCommand(p.Timeout, getDirScript, append([]string{p.Source, h}, p.Exclude...)...)
	}
	var n atomic.Int64
	cmd.Stdout = getSink{w: w, n: &n}
	err := m.syncRun(ctx, p.LeaseID, SyncOut, "get "+string(p.Kind)+" "+p.Source, cmd, &n)
	if errors.Is(err, errSyncTooLarge) {
		return n.Load(), userErrorf(CodeSyncFailed, "%s: %v", p.Source, errSyncTooLarge)
	}
	return n.Load(), err
}

// putSource is a put's bytes, counted into n; past MaxSyncBytes it fails.
// Once stopped it reads no more, so that Put's caller may read what is
// left of Data (the command may end before the stream's client stops
// reading its stdin).
type putSource struct {
	mu      sync.Mutex
	r       io.Reader
	n       atomic.Int64
	stopped bool
}

func (s *putSource) Read(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return 0, io.ErrClosedPipe
	}
	k, err := s.r.Read(p)
	if s.n.Add(int64(k)) > MaxSyncBytes {
		return 0, errSyncTooLarge
	}
	return k, err
}

// stop waits for a read in progress and ends the reads.
func (s *putSource) stop() {
	s.mu.Lock()
	s.stopped = true
	s.mu.Unlock()
}

// getSink is where a get's bytes go, counted into n; past MaxSyncBytes
// it fails.
type getSink struct {
	w io.Writer
	n *atomic.Int64
}

func (w getSink) Write(p []byte) (int, error) {
	if w.n.Load()+int64(len(p)) > MaxSyncBytes {
		return 0, errSyncTooLarge
	}
	k, err := w.w.Write(p)
	w.n.Add(int64(k))
	return k, err
}

// checkSyncPath refuses a path that is not absolute and clean, and a kind
// that is neither file nor directory.
func checkSyncPath(field, p string, kind SyncKind) error {
	if kind != SyncFile && kind != SyncDirectory {
		return &BadRequestError{Field: "kind", Err: fmt.Errorf("%q is neither %q nor %q", kind, SyncFile, SyncDirectory)}
	}
	if !path.IsAbs(p) || path.Clean(p) != p || p == "/" {
		return &BadRequestError{Field: field, Err: fmt.Errorf("%q is not a clean absolute POSIX path below /", p)}
	}
	return nil
}

// syncCommand runs script with args under sh, in the pod's own
// environment, from "/".
func syncCommand(timeout time.Duration, script string, args ...string) cmdclient.Command {
	if timeout <= 0 {
		timeout = defaultSyncTimeout
	}
	return cmdclient.Command{
		Argv:    append([]string{"sh", "-c", script, "sh"}, args...),
		Cwd:     "/",
		Env:     map[string]string{},
		BaseEnv: true,
		Timeout: timeout,
	}
}

// syncRun runs cmd (whose Stdin or Stdout move the bytes, counted into
// moved) on the lease's command stream; a command that does not exit 0 is
// a UserError (CodeSyncFailed) that names what (the verb and path) with
// the tail of its stderr.
func (m *Manager) syncRun(ctx context.Context, id string, dir SyncDirection, what string, cmd cmdclient.Command, moved *atomic.Int64) error {
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	record := func(l *lease, err error) {
		outcome, n := ExecCompleted, int(moved.Load())
		if err != nil {
			outcome, n = ExecFailed, 0
		}
		m.opts.Metrics.SandboxSync(l.Company, string(dir), string(outcome), n)
	}
	return m.onLease(ctx, id, record, func(l *lease, c *cmdclient.Client) error {
		exit, err := c.Exec(ctx, cmd)
		if err != nil {
			return fmt.Errorf("lease %s: sync %s: %w", l.ID, what, err)
		}
		if exitFailed(exit) {
			return userErrorf(CodeSyncFailed, "lease %s: sync %s: %s%s", l.ID, what, exitWords(exit), stderrTail(exit, &stderr))
		}
		return nil
	})
}

// exitWords says how a failed command ended.
// exitFailed reports whether a command did not exit 0 of its own.
func exitFailed(e cmdclient.Exit) bool { return e.Code != 0 || e.Signal != "" || e.TimedOut }

func exitWords(e cmdclient.Exit) string {
	switch {
	case e.TimedOut:
		return "timed out"
	case e.Signal != "":
		return "killed by " + e.Signal
	}
	return "exit status " + strconv.Itoa(e.Code)
}

// stderrTail is ": " and the last 500 bytes of the command's stderr (the
// last of it that stderr kept, and the server's error), or "".
func stderrTail(e cmdclient.Exit, stderr *lockedBuffer) string {
	s := strings.TrimSpace(strings.Join([]string{stderr.String(), e.Error}, "\n"))
	if len(s) > 500 {
		s = "…" + s[len(s)-500:]
	}
	if s == "" {
		return ""
	}
	return ": " + s
}
