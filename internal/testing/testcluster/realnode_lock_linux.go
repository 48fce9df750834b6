package testcluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/pcsync/pcsync/internal/lib/safefile"
)

// machineLock is the machine-wide lock of the real node: an exclusive flock on a
// fixed path (safefile's, no link followed), released by the kernel if the holder
// dies. The file holds the holder's pid and work directory while it runs, and is
// emptied by a clean stop, so a later holder that finds it non-empty knows what a
// crashed run left behind.
type machineLock struct {
	lock *safefile.Lock
	path string
	// previous is what the file held when the lock was taken: "" after a clean
	// stop, else "<pid> <node dir>" of a run that did not stop cleanly.
	previous string
}

// lockMachine takes the lock at path, waiting while another process holds it until
// ctx ends; logf is told once that it waits, and by whom.
func lockMachine(ctx context.Context, path string, logf func(string, ...any)) (*machineLock, error) {
	waited := time.Now()
	logged := false
	lock, err := safefile.LockContext(ctx, path, 0o644, 250*time.Millisecond, func() {
		logf("testcluster: waiting for the real-node lock %s, held by %s (one real node per machine)", path, lockHolder(path))
		logged = true
	})
	if errors.Is(err, safefile.ErrLocked) {
		return nil, fmt.Errorf("real-node lock %s: still held by %s after %s (one real node per machine at a time; "+
			"another test binary or dev cluster runs one): %w", path, lockHolder(path), time.Since(waited).Round(time.Second), err)
	}
	if err != nil {
		return nil, fmt.Errorf("real-node lock %s: %w", path, err)
	}
	if logged {
		logf("testcluster: got the real-node lock %s after %s", path, time.Since(waited).Round(time.Millisecond))
	}
	prev, err := io.ReadAll(lock.File())
	if err != nil {
		lock.Unlock()
		return nil, fmt.Errorf("real-node lock %s: %w", path, err)
	}
	l := &machineLock{lock: lock, path: path, previous: strings.TrimSpace(string(prev))}
	// Name the holder at once (a waiter says whom it waits for); the node directory
	// follows once the work directory exists (record).
	if err := l.record(""); err != nil {
		lock.Unlock()
		return nil, err
	}
	return l, nil
}

// lockHolder describes the process named in the lock file.
func lockHolder(path string) string {
	b, err := os.ReadFile(path)
	if err != nil || len(strings.TrimSpace(string(b))) == 0 {
		return "another process"
	}
	pid, dir, _ := strings.Cut(strings.TrimSpace(string(b)), " ")
	if dir == "" {
		return "pid " + pid + " (starting)"
	}
	return "pid " + pid + " (" + dir + ")"
}

// record writes this process's pid and the node's directory ("" while not yet
// known) into the lock file.
func (l *machineLock) record(nodeDir string) error {
	f := l.lock.File()
	if err := f.Truncate(0); err != nil {
		return fmt.Errorf("real-node lock %s: %w", l.path, err)
	}
	line := strings.TrimSpace(strconv.Itoa(os.Getpid())+" "+nodeDir) + "\n"
	if _, err := f.WriteAt([]byte(line), 0); err != nil {
		return fmt.Errorf("real-node lock %s: %w", l.path, err)
	}
	return nil
}

// previousDir returns the node directory of a run that did not stop cleanly, "" if
// there was none.
func (l *machineLock) previousDir() string {
	_, dir, _ := strings.Cut(l.previous, " ")
	return dir
}

// release empties the file if clean (everything was stopped and swept) and unlocks.
func (l *machineLock) release(clean bool) error {
	if l == nil {
		return nil
	}
	var err error
	if clean {
		err = l.lock.File().Truncate(0)
	}
	l.lock.Unlock()
	if err != nil {
		return fmt.Errorf("real-node lock %s: %w", l.path, err)
	}
	return nil
}
